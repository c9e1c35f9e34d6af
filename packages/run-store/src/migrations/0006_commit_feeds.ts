/**
 * Commit feeds without a shared row. Execution revisions stop advancing the
 * `flows_run_source.revision` singleton and `row_seq` stops coming from the
 * `flows_run_counter` singleton; both rows are left in place and never written
 * again.
 *
 * PostgreSQL: revisions come from the `flows_run_revision` sequence and
 * `row_seq` from `flows_run_row_seq` (each continuing after its singleton's
 * last value; `nextval` never waits), and each change row carries the writing
 * transaction's id, `change_xid`, so a reader can hold back numbers whose
 * transaction may still be open.
 *
 * SQLite: writes are serialized by the database write lock, so numbers taken
 * inside the write transaction are commit-ordered already: a revision is
 * `MAX(revision) + 1` of `flows_run_changes`, and `row_seq` is one above the
 * highest ever recorded there (the change row keeps a deleted run's `row_seq`)
 * or in the frozen counter, whichever is higher.
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Revisions from "./revisions.js"

/** Creates `name` continuing after `last` (0: starts at 1), capped at 2^53 - 1. */
const sequence = (sql: SqlClient.SqlClient, name: string, last: number) =>
  Effect.gen(function*() {
    yield* sql.unsafe(`CREATE SEQUENCE ${name} AS bigint MINVALUE 1 MAXVALUE 9007199254740991 NO CYCLE`)
    // setval(…, 1, false) makes the next value 1; setval(…, n, true) makes it n + 1.
    yield* sql`SELECT setval(${name}, ${Math.max(last, 1)}, ${last > 0})`
  })

export const commitFeeds: Effect.Effect<void, unknown, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [last] = yield* sql<{ readonly revision: number | string; readonly row_seq: number | string }>`SELECT
    (SELECT MAX(m) FROM (SELECT revision AS m FROM flows_run_source UNION ALL
      SELECT MAX(revision) FROM flows_run_changes UNION ALL SELECT 0) r) AS revision,
    (SELECT MAX(m) FROM (SELECT last_row_seq AS m FROM flows_run_counter UNION ALL
      SELECT MAX(row_seq) FROM flows_runs UNION ALL SELECT 0) s) AS row_seq`
  if (Dialect.isPostgres(sql)) {
    yield* sequence(sql, "flows_run_revision", Number(last!.revision))
    yield* sequence(sql, "flows_run_row_seq", Number(last!.row_seq))
    // Rows written before this migration are committed: id 0 puts them below every reader's horizon.
    yield* sql`ALTER TABLE flows_run_changes ADD COLUMN change_xid xid8 NOT NULL DEFAULT '0'`
    yield* sql`ALTER TABLE flows_run_changes ALTER COLUMN change_xid DROP DEFAULT`
    yield* sql`CREATE INDEX flows_run_changes_feed_idx ON flows_run_changes (change_xid, revision)`
  } else {
    yield* sql`ALTER TABLE flows_run_changes ADD COLUMN row_seq INTEGER`
    yield* sql`UPDATE flows_run_changes SET row_seq = (SELECT r.row_seq FROM flows_runs r WHERE r.run_id = flows_run_changes.run_id)`
    yield* sql`CREATE INDEX flows_run_changes_row_seq_idx ON flows_run_changes (row_seq)`
  }
  yield* Revisions.replaceTriggers(sql, "feed")
})
