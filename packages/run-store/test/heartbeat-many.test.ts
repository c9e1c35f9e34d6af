import { describe } from "@effect/vitest"
import { sqliteStack } from "./support/stack.js"
import { heartbeatManySuite } from "./suites/heartbeat-many.js"

describe("batched heartbeats (SQLite)", () => heartbeatManySuite(sqliteStack))
