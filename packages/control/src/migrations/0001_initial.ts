/**
 * Control's initial migration (ledger id 2001): the final shape of every `control_*` table.
 * Statements are idempotent, so a re-run over existing tables is harmless.
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

const tokenKey = `PRIMARY KEY (target_tag, run_id, target_id),
  CHECK (target_tag IN ('Plan', 'Node')),
  CHECK ((target_tag = 'Plan' AND run_id = '') OR (target_tag = 'Node' AND length(run_id) > 0)),
  CHECK (length(target_id) > 0 AND token_id = target_id)`

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const int = Dialect.integer(sql)
  yield* sql`CREATE TABLE IF NOT EXISTS control_sequences (
    name TEXT PRIMARY KEY,
    value ${int} NOT NULL CHECK (value >= 0)
  )`
  yield* sql`CREATE TABLE IF NOT EXISTS control_plans (
    plan_id TEXT PRIMARY KEY,
    row_seq ${int} NOT NULL UNIQUE CHECK (row_seq > 0),
    card_json TEXT NOT NULL,
    decoded_input_json TEXT NOT NULL,
    decision TEXT NOT NULL CHECK (decision IN ('pending', 'approved', 'denied'))
  )`
  yield* sql`CREATE TABLE IF NOT EXISTS control_plan_keys (
    idempotency_key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    plan_id TEXT NOT NULL
  )`
  yield* sql`CREATE TABLE IF NOT EXISTS control_tokens (
    target_tag TEXT NOT NULL,
    run_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    token_id TEXT NOT NULL,
    target_json TEXT NOT NULL,
    resolved ${int} NOT NULL CHECK (resolved IN (0, 1)),
    decision_principal_json TEXT NULL,
    decision_json TEXT NULL,
    ${sql.literal(tokenKey)}
  )`
  yield* sql`CREATE TABLE IF NOT EXISTS control_grants (
    target_tag TEXT NOT NULL,
    run_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    token_id TEXT NOT NULL,
    envelope_json TEXT NOT NULL,
    scope TEXT NOT NULL,
    installed_at_ms ${int} NOT NULL,
    ${sql.literal(tokenKey)}
  )`
  yield* sql`CREATE TABLE IF NOT EXISTS control_mutations (
    mutation_key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    receipt_json TEXT NOT NULL
  )`
  yield* sql`CREATE TABLE IF NOT EXISTS control_run_keys (
    idempotency_key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    claimant TEXT NOT NULL
  )`
  yield* sql`CREATE TABLE IF NOT EXISTS control_runs (
    run_id TEXT PRIMARY KEY,
    created_seq ${int} NOT NULL,
    principal_id TEXT NULL,
    principal_kind TEXT NULL
  )`
  yield* sql`CREATE INDEX IF NOT EXISTS control_runs_created_seq_idx ON control_runs (created_seq)`
  yield* sql`CREATE TABLE IF NOT EXISTS control_run_resumes (
    run_id TEXT PRIMARY KEY,
    requested_seq ${int} NOT NULL,
    requested_at_ms ${int} NOT NULL,
    consent_seq ${int} NULL
  )`
  yield* sql`CREATE TABLE IF NOT EXISTS control_run_messages (
    seq ${int} NOT NULL PRIMARY KEY CHECK (seq > 0),
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('signal', 'steer')),
    payload_json TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX IF NOT EXISTS control_run_messages_run_idx ON control_run_messages (run_id, kind, seq)`
  yield* sql`CREATE TABLE IF NOT EXISTS control_signal_commands (
    seq ${int} NOT NULL PRIMARY KEY CHECK (seq > 0),
    command_id TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    wait_token TEXT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'rejected', 'terminal')),
    principal_json TEXT NULL
  )`
  yield* sql`CREATE UNIQUE INDEX IF NOT EXISTS control_signal_commands_token_idx
    ON control_signal_commands (wait_token) WHERE wait_token IS NOT NULL`
  yield* sql`CREATE INDEX IF NOT EXISTS control_signal_commands_state_idx ON control_signal_commands (state, seq)`
  yield* sql`CREATE INDEX IF NOT EXISTS control_signal_commands_run_idx ON control_signal_commands (run_id, seq)`
})
