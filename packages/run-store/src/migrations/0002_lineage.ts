/**
 * Trampoline lineage coordinates: `lineage_id` and `round_ordinal`, unique as a pair.
 * Both nullable, so earlier rows read as round 0 of a lineage of one.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { nullableSafe } from "./sql.js"

export const lineage: Effect.Effect<void, unknown, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE flows_runs ADD COLUMN lineage_id TEXT CHECK (lineage_id IS NULL OR length(lineage_id) > 0)`
  yield* sql`ALTER TABLE flows_runs ADD COLUMN ${nullableSafe(sql, "round_ordinal")}`
  yield* sql`CREATE UNIQUE INDEX flows_runs_lineage_idx ON flows_runs (lineage_id, round_ordinal)`
})
