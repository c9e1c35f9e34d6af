/**
 * `flows_consensus_leases`: the lease state of the journal's former SQL
 * strategy (owner columns all NULL or all set, likewise the claim columns; an
 * emptied row was deleted). Unused since the run row became the lease record;
 * kept as recorded, and dropped by the run store's `0007_drop_consensus_leases`.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { idColumn, intColumn } from "../internal/ddl.js"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE flows_consensus_leases (
    run_id TEXT PRIMARY KEY CHECK (length(run_id) > 0),
    ${idColumn(sql, "owner_host_id", true)},
    ${intColumn(sql, "owner_pid", true)},
    ${idColumn(sql, "owner_nonce", true)},
    ${intColumn(sql, "granted_at_ms", true)},
    ${intColumn(sql, "heartbeat_at_ms", true)},
    ${idColumn(sql, "claim_host_id", true)},
    ${intColumn(sql, "claim_pid", true)},
    ${idColumn(sql, "claim_nonce", true)},
    ${intColumn(sql, "claimed_at_ms", true)},
    CHECK (
      (owner_host_id IS NULL AND owner_pid IS NULL AND owner_nonce IS NULL AND granted_at_ms IS NULL
        AND heartbeat_at_ms IS NULL)
      OR (owner_host_id IS NOT NULL AND owner_pid IS NOT NULL AND owner_nonce IS NOT NULL
        AND granted_at_ms IS NOT NULL AND heartbeat_at_ms IS NOT NULL)
    ),
    CHECK (
      (claim_host_id IS NULL AND claim_pid IS NULL AND claim_nonce IS NULL AND claimed_at_ms IS NULL)
      OR (claim_host_id IS NOT NULL AND claim_pid IS NOT NULL AND claim_nonce IS NOT NULL
        AND claimed_at_ms IS NOT NULL)
    )
  )`
})
