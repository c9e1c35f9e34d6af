/**
 * Duplicate `create` on SQLite (see suites/duplicate-create.ts).
 */
import { describe } from "@effect/vitest"
import { duplicateCreateSuite } from "./suites/duplicate-create.js"
import { sqliteStack } from "./support/stack.js"

describe("duplicate create (SQLite)", () => duplicateCreateSuite(sqliteStack))
