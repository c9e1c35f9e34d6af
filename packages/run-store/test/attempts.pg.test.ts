import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { postgresStack } from "./support/stack.js"
import { attemptsSuite } from "./suites/attempts.js"

const url = TestDatabase.postgresTestUrl("run-store attempts")

describe.skipIf(url === undefined)("attempts (PostgreSQL)", () => attemptsSuite(postgresStack(url!)))
