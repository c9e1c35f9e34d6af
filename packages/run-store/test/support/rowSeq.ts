/**
 * What `RunStore.create` writes as `row_seq`, for tests that insert run rows themselves, and how to
 * restart the numbering after emptying the tables.
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/** The next number, as the store takes it. */
export { nextRowSeq } from "../../src/internal/rowSeq.js"

/** After the run rows were deleted: forget their change rows and number from 1 again. */
export const restartNumbering = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    yield* sql`DELETE FROM flows_run_changes`
    yield* sql`UPDATE flows_run_counter SET last_row_seq = 0`
    if (Dialect.isPostgres(sql)) {
      yield* sql`ALTER SEQUENCE flows_run_row_seq RESTART`
      yield* sql`ALTER SEQUENCE flows_run_revision RESTART`
    }
  })
