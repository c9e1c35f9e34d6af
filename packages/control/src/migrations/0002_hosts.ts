/**
 * Control's host presence table (ledger id 2002): one row per running host incarnation, refreshed by the
 * host and deleted on its graceful shutdown, so readers see idle hosts that hold no run.
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const int = Dialect.integer(sql)
  yield* sql`CREATE TABLE IF NOT EXISTS control_hosts (
    incarnation TEXT PRIMARY KEY,
    host_id TEXT NOT NULL,
    pid ${int} NOT NULL CHECK (pid > 0),
    flows_json TEXT NOT NULL,
    started_at_ms ${int} NOT NULL,
    seen_at_ms ${int} NOT NULL
  )`
  yield* sql`CREATE INDEX IF NOT EXISTS control_hosts_seen_at_idx ON control_hosts (seen_at_ms)`
})
