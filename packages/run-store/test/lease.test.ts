import { describe } from "@effect/vitest"
import { sqliteStack } from "./support/stack.js"
import { leaseSuite } from "./suites/lease.js"

describe("heartbeats, transitions and journal atomicity (SQLite)", () => leaseSuite(sqliteStack))
