import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { postgresStack } from "./support/stack.js"
import { leaseSuite } from "./suites/lease.js"

const url = TestDatabase.postgresTestUrl("run-store lease")

describe.skipIf(url === undefined)("heartbeats, transitions and journal atomicity (PostgreSQL)", () =>
  leaseSuite(postgresStack(url!)))
