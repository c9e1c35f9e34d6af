import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { postgresStack } from "./support/stack.js"
import { claimsSuite } from "./suites/claims.js"

const url = TestDatabase.postgresTestUrl("run-store claims")

describe.skipIf(url === undefined)("claims and ownership (PostgreSQL)", () => claimsSuite(postgresStack(url!)))
