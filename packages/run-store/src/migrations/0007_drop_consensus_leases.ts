/**
 * One lease record: drops the journal's `flows_consensus_leases`, which the
 * strategy over the run row replaced (0005) and nothing reads any more.
 *
 * Before the drop, a running row without a generation takes the one its owner
 * was granted in the table. 0005 gave every running row a generation, so such a
 * row can only come from a host still running code older than 0005 while the
 * migration ran (it activated through the table and mirrored the owner onto the
 * row, leaving `granted_at_ms` empty). Without a matching lease the owner keeps
 * its start as the generation, as in 0005. Like 0005 this is bookkeeping, not a
 * change of the run: the revision trigger is set aside while it is written.
 *
 * Safe whether the database had 0005 applied earlier or in this same pass, and
 * whether or not the table exists (a database migrated without the journal's set
 * never had it).
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Revisions from "./revisions.js"

export const dropConsensusLeases: Effect.Effect<void, unknown, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  if ((yield* Dialect.tables(sql)).includes("flows_consensus_leases")) {
    const [missing] = yield* sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM flows_runs
      WHERE status = 'running' AND granted_at_ms IS NULL`
    if (Number(missing!.n) > 0) {
      yield* Dialect.dropTrigger(sql, "flows_runs_revision_update", "flows_runs")
      yield* sql`UPDATE flows_runs SET granted_at_ms = COALESCE((
          SELECT l.granted_at_ms FROM flows_consensus_leases l
          WHERE l.run_id = flows_runs.run_id AND l.owner_host_id = flows_runs.owner_host_id
            AND l.owner_pid = flows_runs.owner_pid AND l.owner_nonce = flows_runs.owner_nonce),
          started_at_ms, heartbeat_at_ms)
        WHERE status = 'running' AND granted_at_ms IS NULL`
      yield* Revisions.updateTrigger(sql, "feed")
    }
  }
  yield* sql`DROP TABLE IF EXISTS flows_consensus_leases`
})
