/**
 * Queue semantics of the SQL runtime on SQLite: candidate order, pause, the global limit inside the
 * claim, and `Queues`.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { suite } from "./fixtures/queueClaims.js"

describe("queues on SQLite", () => {
  suite(() => TestDatabase.layer)
})
