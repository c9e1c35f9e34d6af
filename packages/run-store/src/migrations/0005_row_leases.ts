/**
 * `granted_at_ms`: the generation the current owner was granted, kept on the
 * run row so the row is the lease record the run store's SQL strategy reads and
 * writes. Live owners recorded in the journal's `flows_consensus_leases` (when
 * that table exists) bring their generation onto the row; the revision update
 * trigger is recreated so it covers the new column.
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Revisions from "./revisions.js"
import { nullableSafe } from "./sql.js"

export const rowLeases: Effect.Effect<void, unknown, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE flows_runs ADD COLUMN ${nullableSafe(sql, "granted_at_ms")}`
  // Copied before the trigger covers the column: moving bookkeeping is not a change of the run.
  if ((yield* Dialect.tables(sql)).includes("flows_consensus_leases")) {
    yield* sql`UPDATE flows_runs SET granted_at_ms = (
        SELECT l.granted_at_ms FROM flows_consensus_leases l
        WHERE l.run_id = flows_runs.run_id AND l.owner_host_id = flows_runs.owner_host_id
          AND l.owner_pid = flows_runs.owner_pid AND l.owner_nonce = flows_runs.owner_nonce)
      WHERE status = 'running'`
  }
  // An owner without a recorded generation (no lease row) keeps its start as the generation.
  yield* sql`UPDATE flows_runs SET granted_at_ms = COALESCE(started_at_ms, heartbeat_at_ms)
    WHERE status = 'running' AND granted_at_ms IS NULL`
  yield* Revisions.updateTrigger(sql)
})
