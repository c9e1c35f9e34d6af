/**
 * Control's numbers on SQLite: derived from the rows (or counted) inside the write, continuing after an
 * older database's counters.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { suite } from "./fixtures/sqlSequences.js"

describe("control numbers on SQLite", () => {
  suite(() => TestDatabase.layer)
})
