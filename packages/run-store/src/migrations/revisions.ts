/**
 * The execution-revision triggers: every change of a `flows_runs` row except a
 * heartbeat-only update records a fresh revision for the run in
 * `flows_run_changes`.
 *
 * Two ways of numbering exist. `"singleton"` (0003, 0004) advanced
 * `flows_run_source.revision`, a row every writer of every run locked until
 * commit. `"feed"` (0006 on) takes no shared row: PostgreSQL numbers from the
 * `flows_run_revision` sequence and stamps the writing transaction's id, and
 * SQLite (writes serialized by its write lock) numbers from the table's own
 * `MAX(revision) + 1`. Migrations keep the numbering they shipped with.
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/** How a trigger numbers a change. */
export type Numbering = "singleton" | "feed"

const missingSource = "execution source identity is missing"

const body = (sql: SqlClient.SqlClient, row: "NEW" | "OLD", deleted: 0 | 1, numbering: Numbering): string => {
  const pg = Dialect.isPostgres(sql)
  // The guard only reads the identity row: readers never wait on writers in either database.
  const guard = pg
    ? `IF NOT EXISTS (SELECT 1 FROM flows_run_source WHERE singleton = 1) THEN
        RAISE EXCEPTION '${missingSource}' USING ERRCODE = '23514';
      END IF;`
    : `SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM flows_run_source WHERE singleton = 1)
        THEN RAISE(ABORT, '${missingSource}') END;`
  if (numbering === "singleton") {
    return `${guard}
    UPDATE flows_run_source SET revision = revision + 1 WHERE singleton = 1;
    INSERT INTO flows_run_changes (run_id, revision, deleted)
      SELECT ${row}.run_id, revision, ${deleted} FROM flows_run_source WHERE singleton = 1
      ON CONFLICT (run_id) DO UPDATE SET revision = excluded.revision, deleted = excluded.deleted;`
  }
  // The upsert locks only this run's change row. Tombstones are never removed, so on SQLite the
  // maximum never goes down and `MAX + 1` is always a number no change ever had; the tombstone also
  // keeps a deleted run's `row_seq`, so `create` never hands that number out again.
  return pg
    ? `${guard}
    INSERT INTO flows_run_changes (run_id, revision, deleted, change_xid)
      VALUES (${row}.run_id, nextval('flows_run_revision'), ${deleted}, pg_current_xact_id())
      ON CONFLICT (run_id) DO UPDATE SET revision = excluded.revision, deleted = excluded.deleted,
        change_xid = excluded.change_xid;`
    : `${guard}
    INSERT INTO flows_run_changes (run_id, revision, deleted, row_seq)
      VALUES (${row}.run_id, (SELECT COALESCE(MAX(revision), 0) + 1 FROM flows_run_changes), ${deleted}, ${row}.row_seq)
      ON CONFLICT (run_id) DO UPDATE SET revision = excluded.revision, deleted = excluded.deleted,
        row_seq = excluded.row_seq;`
}

/** (Re)creates the update trigger over every column except `heartbeat_at_ms`. */
export const updateTrigger = (sql: SqlClient.SqlClient, numbering: Numbering = "singleton") =>
  Effect.gen(function*() {
    yield* Dialect.dropTrigger(sql, "flows_runs_revision_update", "flows_runs")
    const columns = (yield* Dialect.columns(sql, "flows_runs")).filter((c) => c !== "heartbeat_at_ms")
    yield* Dialect.trigger(sql, {
      name: "flows_runs_revision_update",
      table: "flows_runs",
      event: `AFTER UPDATE OF ${columns.join(", ")}`,
      body: body(sql, "NEW", 0, numbering)
    })
  })

export const insertTrigger = (sql: SqlClient.SqlClient, numbering: Numbering = "singleton") =>
  Dialect.trigger(sql, {
    name: "flows_runs_revision_insert",
    table: "flows_runs",
    event: "AFTER INSERT",
    body: body(sql, "NEW", 0, numbering)
  })

export const deleteTrigger = (sql: SqlClient.SqlClient, numbering: Numbering = "singleton") =>
  Dialect.trigger(sql, {
    name: "flows_runs_revision_delete",
    table: "flows_runs",
    event: "AFTER DELETE",
    body: body(sql, "OLD", 1, numbering)
  })

/** Replaces the insert, update and delete triggers with ones of the given numbering. */
export const replaceTriggers = (sql: SqlClient.SqlClient, numbering: Numbering) =>
  Effect.gen(function*() {
    yield* Dialect.dropTrigger(sql, "flows_runs_revision_insert", "flows_runs")
    yield* Dialect.dropTrigger(sql, "flows_runs_revision_delete", "flows_runs")
    yield* insertTrigger(sql, numbering)
    yield* deleteTrigger(sql, numbering)
    yield* updateTrigger(sql, numbering)
  })

export const identityTrigger = (sql: SqlClient.SqlClient) =>
  Dialect.trigger(sql, {
    name: "flows_runs_identity_immutable",
    table: "flows_runs",
    event: "BEFORE UPDATE OF run_id, row_seq",
    when: "NEW.run_id <> OLD.run_id OR NEW.row_seq <> OLD.row_seq",
    reject: "run identity is immutable"
  })
