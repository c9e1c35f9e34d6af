/**
 * Execution revisions: the source identity and revision counter, per-run
 * change rows (tombstones outlive runs), the cancel acknowledgement column,
 * a backfill, and the revision and identity triggers.
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Revisions from "./revisions.js"
import { nullableJson, requiredSafe, safe } from "./sql.js"

export const executionRevisions: Effect.Effect<void, unknown, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const pg = Dialect.isPostgres(sql)
  const int = Dialect.integer(sql)
  const hexOnly = pg ? sql.literal(`source !~ '[^0-9a-f]'`) : sql.literal(`source NOT GLOB '*[^0-9a-f]*'`)
  yield* sql`CREATE TABLE flows_run_source (
    singleton ${int} PRIMARY KEY CHECK (singleton = 1),
    source TEXT NOT NULL CHECK (length(source) = 32 AND ${hexOnly}),
    ${requiredSafe(sql, "revision")}
  )`
  const randomSource = pg
    ? sql.literal(`replace(gen_random_uuid()::text, '-', '')`)
    : sql.literal(`lower(hex(randomblob(16)))`)
  yield* sql`INSERT INTO flows_run_source (singleton, source, revision) VALUES (1, ${randomSource}, 0)`
  yield* sql`CREATE TABLE flows_run_changes (
    run_id TEXT PRIMARY KEY NOT NULL CHECK (length(run_id) > 0),
    revision ${int} NOT NULL UNIQUE CHECK (${safe(sql, "revision")} AND revision > 0),
    deleted ${int} NOT NULL CHECK (deleted IN (0, 1))
  )`
  yield* sql`ALTER TABLE flows_runs ADD COLUMN ${nullableJson(sql, "cancel_acknowledgement_json")}`
  yield* sql`INSERT INTO flows_run_changes (run_id, revision, deleted)
    SELECT run_id, ROW_NUMBER() OVER (ORDER BY created_at_ms, run_id), 0 FROM flows_runs`
  yield* sql`UPDATE flows_run_source SET revision = (SELECT count(*) FROM flows_run_changes) WHERE singleton = 1`
  yield* Revisions.insertTrigger(sql)
  yield* Revisions.updateTrigger(sql)
  yield* Revisions.deleteTrigger(sql)
  yield* Revisions.identityTrigger(sql)
})
