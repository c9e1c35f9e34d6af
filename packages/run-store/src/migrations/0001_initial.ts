/**
 * `flows_runs`, `flows_attempts` and the `row_seq` counter.
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { nullableJson, nullableSafe, requiredSafe, safe } from "./sql.js"

export const initial: Effect.Effect<void, unknown, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const int = Dialect.integer(sql)
  yield* sql`CREATE TABLE flows_runs (
    row_seq ${int} NOT NULL UNIQUE CHECK (${safe(sql, "row_seq")} AND row_seq > 0),
    run_id TEXT PRIMARY KEY CHECK (length(run_id) > 0),
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'suspended', 'completed', 'failed', 'cancelled')),
    ${requiredSafe(sql, "created_at_ms")},
    ${nullableSafe(sql, "started_at_ms")},
    ${nullableSafe(sql, "finished_at_ms")},
    owner_host_id TEXT,
    owner_pid ${int},
    owner_nonce TEXT,
    ${nullableSafe(sql, "heartbeat_at_ms")},
    claim_host_id TEXT,
    claim_pid ${int},
    claim_nonce TEXT,
    ${nullableSafe(sql, "claimed_at_ms")},
    parent_run_id TEXT CHECK (parent_run_id IS NULL OR length(parent_run_id) > 0),
    ${nullableSafe(sql, "cancel_requested_at_ms")},
    waiting_reason TEXT CHECK (waiting_reason IS NULL OR length(waiting_reason) > 0),
    ${nullableSafe(sql, "waiting_wake_at_ms")},
    waiting_token TEXT CHECK (waiting_token IS NULL OR length(waiting_token) > 0),
    state_json TEXT NOT NULL CHECK (${Dialect.jsonValid(sql, sql`state_json`)}),
    CHECK (
      (status = 'running'
        AND owner_host_id IS NOT NULL AND length(owner_host_id) > 0
        AND owner_pid IS NOT NULL AND ${Dialect.isInteger(sql, sql`owner_pid`)} AND owner_pid >= 0
        AND owner_nonce IS NOT NULL AND length(owner_nonce) > 0
        AND heartbeat_at_ms IS NOT NULL)
      OR (status <> 'running'
        AND owner_host_id IS NULL AND owner_pid IS NULL AND owner_nonce IS NULL AND heartbeat_at_ms IS NULL)
    ),
    CHECK (
      (claim_host_id IS NULL AND claim_pid IS NULL AND claim_nonce IS NULL AND claimed_at_ms IS NULL)
      OR (claim_host_id IS NOT NULL AND length(claim_host_id) > 0
        AND claim_pid IS NOT NULL AND ${Dialect.isInteger(sql, sql`claim_pid`)} AND claim_pid >= 0
        AND claim_nonce IS NOT NULL AND length(claim_nonce) > 0
        AND claimed_at_ms IS NOT NULL)
    ),
    CHECK (
      (waiting_reason IS NULL AND waiting_wake_at_ms IS NULL AND waiting_token IS NULL)
      OR waiting_reason IS NOT NULL
    ),
    FOREIGN KEY (parent_run_id) REFERENCES flows_runs (run_id)
  )`
  yield* sql`CREATE INDEX flows_runs_parent_run_id_idx ON flows_runs (parent_run_id)`
  yield* sql`CREATE INDEX flows_runs_cancel_requested_idx ON flows_runs (cancel_requested_at_ms)
    WHERE cancel_requested_at_ms IS NOT NULL`
  yield* sql`CREATE INDEX flows_runs_waiting_reason_wake_at_idx ON flows_runs (waiting_reason, waiting_wake_at_ms)
    WHERE waiting_reason IS NOT NULL`
  yield* sql`CREATE TABLE flows_run_counter (
    singleton ${int} PRIMARY KEY CHECK (singleton = 1),
    ${requiredSafe(sql, "last_row_seq")}
  )`
  yield* sql`INSERT INTO flows_run_counter (singleton, last_row_seq) VALUES (1, 0)`
  yield* sql`CREATE TABLE flows_attempts (
    run_id TEXT NOT NULL CHECK (length(run_id) > 0),
    step_key_digest TEXT NOT NULL CHECK (length(step_key_digest) > 0),
    ${requiredSafe(sql, "attempt")},
    state TEXT NOT NULL CHECK (length(state) > 0),
    ${requiredSafe(sql, "started_at_ms")},
    ${nullableSafe(sql, "finished_at_ms")},
    ${nullableSafe(sql, "heartbeat_at_ms")},
    ${nullableJson(sql, "checkpoint_json")},
    ${nullableJson(sql, "error_json")},
    ${nullableJson(sql, "outcome_json")},
    meta_json TEXT NOT NULL CHECK (${Dialect.jsonValid(sql, sql`meta_json`)}),
    PRIMARY KEY (run_id, step_key_digest, attempt),
    FOREIGN KEY (run_id) REFERENCES flows_runs (run_id)
  )`
})
