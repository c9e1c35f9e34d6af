/**
 * What `RunStore.create` writes as `row_seq`, for tests that insert run rows themselves, and how to
 * restart the numbering after emptying the tables.
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"

/** The next number, as the store takes it (PostgreSQL: the sequence; SQLite: one above the highest). */
export const nextRowSeq = (sql: SqlClient.SqlClient): Fragment =>
  sql.literal(
    Dialect.isPostgres(sql)
      ? `nextval('flows_run_row_seq')`
      : `(SELECT MAX(m) + 1 FROM (SELECT MAX(row_seq) AS m FROM flows_run_changes
          UNION ALL SELECT last_row_seq FROM flows_run_counter UNION ALL SELECT 0))`
  )

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
