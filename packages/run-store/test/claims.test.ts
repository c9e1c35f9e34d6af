import { describe } from "@effect/vitest"
import { sqliteStack } from "./support/stack.js"
import { claimsSuite } from "./suites/claims.js"

describe("claims and ownership (SQLite)", () => claimsSuite(sqliteStack))
