/**
 * The execution-revision triggers (§5.3, §15), shared by 0003 and 0004: every
 * change of a `flows_runs` row except a heartbeat-only update advances
 * `flows_run_source.revision` and records it in `flows_run_changes`.
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

const missingSource = "execution source identity is missing"

const body = (sql: SqlClient.SqlClient, row: "NEW" | "OLD", deleted: 0 | 1): string => {
  const guard = Dialect.isPostgres(sql)
    ? `IF NOT EXISTS (SELECT 1 FROM flows_run_source WHERE singleton = 1) THEN
        RAISE EXCEPTION '${missingSource}' USING ERRCODE = '23514';
      END IF;`
    : `SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM flows_run_source WHERE singleton = 1)
        THEN RAISE(ABORT, '${missingSource}') END;`
  return `${guard}
    UPDATE flows_run_source SET revision = revision + 1 WHERE singleton = 1;
    INSERT INTO flows_run_changes (run_id, revision, deleted)
      SELECT ${row}.run_id, revision, ${deleted} FROM flows_run_source WHERE singleton = 1
      ON CONFLICT (run_id) DO UPDATE SET revision = excluded.revision, deleted = excluded.deleted;`
}

/** (Re)creates the update trigger over every column except `heartbeat_at_ms`. */
export const updateTrigger = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    yield* Dialect.dropTrigger(sql, "flows_runs_revision_update", "flows_runs")
    const columns = (yield* Dialect.columns(sql, "flows_runs")).filter((c) => c !== "heartbeat_at_ms")
    yield* Dialect.trigger(sql, {
      name: "flows_runs_revision_update",
      table: "flows_runs",
      event: `AFTER UPDATE OF ${columns.join(", ")}`,
      body: body(sql, "NEW", 0)
    })
  })

export const insertTrigger = (sql: SqlClient.SqlClient) =>
  Dialect.trigger(sql, {
    name: "flows_runs_revision_insert",
    table: "flows_runs",
    event: "AFTER INSERT",
    body: body(sql, "NEW", 0)
  })

export const deleteTrigger = (sql: SqlClient.SqlClient) =>
  Dialect.trigger(sql, {
    name: "flows_runs_revision_delete",
    table: "flows_runs",
    event: "AFTER DELETE",
    body: body(sql, "OLD", 1)
  })

export const identityTrigger = (sql: SqlClient.SqlClient) =>
  Dialect.trigger(sql, {
    name: "flows_runs_identity_immutable",
    table: "flows_runs",
    event: "BEFORE UPDATE OF run_id, row_seq",
    when: "NEW.run_id <> OLD.run_id OR NEW.row_seq <> OLD.row_seq",
    reject: "run identity is immutable"
  })
