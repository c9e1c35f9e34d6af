/**
 * `waiting_request`: the JSON a park declared about itself, written and
 * cleared by the engine with the other waiting columns. Recreates the
 * revision update trigger so it covers the new column.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Revisions from "./revisions.js"
import { nullableJson } from "./sql.js"

export const waitingRequest: Effect.Effect<void, unknown, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE flows_runs ADD COLUMN ${nullableJson(sql, "waiting_request")}`
  yield* Revisions.updateTrigger(sql)
})
