import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { postgresStack } from "./support/stack.js"
import { pulseSuite } from "./suites/pulse.js"

const url = TestDatabase.postgresTestUrl("run-store heartbeat pulse")

describe.skipIf(url === undefined)("Heartbeat.Pulse (PostgreSQL)", () => pulseSuite(postgresStack(url!)))
