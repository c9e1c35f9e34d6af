import { describe } from "@effect/vitest"
import { sqliteStack } from "./support/stack.js"
import { pulseSuite } from "./suites/pulse.js"

describe("Heartbeat.Pulse (SQLite)", () => pulseSuite(sqliteStack))
