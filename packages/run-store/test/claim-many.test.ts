import { describe } from "@effect/vitest"
import { claimManySuite } from "./suites/claim-many.js"
import { sqliteStack } from "./support/stack.js"

describe("claimAndOwnMany (SQLite)", () => claimManySuite(sqliteStack))
