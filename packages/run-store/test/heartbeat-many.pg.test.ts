import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { postgresStack } from "./support/stack.js"
import { heartbeatManySuite } from "./suites/heartbeat-many.js"

const url = TestDatabase.postgresTestUrl("run-store batched heartbeats")

describe.skipIf(url === undefined)("batched heartbeats (PostgreSQL)", () => heartbeatManySuite(postgresStack(url!)))
