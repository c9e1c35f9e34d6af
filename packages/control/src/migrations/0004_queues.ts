/**
 * Runs as a work queue (ledger id 2004): each launched run carries its queue, priority, the time it
 * becomes available and its retry policy and attempt number; `control_queues` holds a queue's pause flag
 * and global concurrency limit; `control_start_keys` maps a start's idempotency key to its run.
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const int = Dialect.integer(sql)
  yield* sql`ALTER TABLE control_runs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default'`
  yield* sql`ALTER TABLE control_runs ADD COLUMN priority ${int} NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE control_runs ADD COLUMN available_at_ms ${int} NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE control_runs ADD COLUMN retry_json TEXT NULL`
  yield* sql`ALTER TABLE control_runs ADD COLUMN attempt ${int} NOT NULL DEFAULT 1`
  // Claim order: highest priority first, then the earliest available, then the oldest.
  yield* sql`CREATE INDEX IF NOT EXISTS control_runs_claim_order_idx
    ON control_runs (queue, priority DESC, available_at_ms, created_seq)`
  yield* sql`CREATE TABLE IF NOT EXISTS control_queues (
    queue TEXT PRIMARY KEY,
    paused ${int} NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    concurrency ${int} NULL CHECK (concurrency IS NULL OR concurrency > 0),
    updated_at_ms ${int} NOT NULL
  )`
  yield* sql`CREATE TABLE IF NOT EXISTS control_start_keys (
    idempotency_key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    run_id TEXT NOT NULL
  )`
})
