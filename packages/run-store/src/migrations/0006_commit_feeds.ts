/**
 * Commit feeds without a shared row: execution revisions stop advancing the
 * `flows_run_source.revision` singleton. On PostgreSQL they come from the
 * `flows_run_revision` sequence (continuing after the singleton's last value)
 * and each change row carries the writing transaction's id, `change_xid`, so a
 * reader can hold back numbers whose transaction may still be open. On SQLite
 * the write lock already orders them. The singleton column is left in place
 * and no longer read.
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Revisions from "./revisions.js"

export const commitFeeds: Effect.Effect<void, unknown, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  if (Dialect.isPostgres(sql)) {
    const [head] = yield* sql<{ readonly h: number | string }>`SELECT GREATEST(
      COALESCE((SELECT revision FROM flows_run_source WHERE singleton = 1), 0),
      COALESCE((SELECT MAX(revision) FROM flows_run_changes), 0)) AS h`
    const last = Number(head?.h ?? 0)
    yield* sql`CREATE SEQUENCE flows_run_revision AS bigint MINVALUE 1 MAXVALUE 9007199254740991 NO CYCLE`
    // setval(…, 1, false) makes the next value 1; setval(…, n, true) makes it n + 1.
    yield* sql`SELECT setval('flows_run_revision', ${Math.max(last, 1)}, ${last > 0})`
    // Rows written before this migration are committed: id 0 puts them below every reader's horizon.
    yield* sql`ALTER TABLE flows_run_changes ADD COLUMN change_xid xid8 NOT NULL DEFAULT '0'`
    yield* sql`ALTER TABLE flows_run_changes ALTER COLUMN change_xid DROP DEFAULT`
    yield* sql`CREATE INDEX flows_run_changes_feed_idx ON flows_run_changes (change_xid, revision)`
  }
  yield* Revisions.replaceTriggers(sql, "feed")
})
