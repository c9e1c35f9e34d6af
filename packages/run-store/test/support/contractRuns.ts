/** The pending runs the Consensus contract's tests name, for the row-backed strategy (no row: never granted). */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

export const contractRuns = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.forEach(["r", "r1", "r2"], (runId, i) =>
    sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, state_json)
      VALUES (${i + 1}, ${runId}, 'pending', 0, '{}')`, { discard: true }))
