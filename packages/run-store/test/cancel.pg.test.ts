import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { postgresStack } from "./support/stack.js"
import { cancelSuite } from "./suites/cancel.js"

const url = TestDatabase.postgresTestUrl("run-store cancel")

describe.skipIf(url === undefined)("cancellation and lineage (PostgreSQL)", () => cancelSuite(postgresStack(url!)))
