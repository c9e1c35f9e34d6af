/**
 * `baton_json_valid` inside a parallel plan: its exception block cannot run in a
 * parallel worker (seen by hand: a forced-parallel scan filtering on a PARALLEL SAFE
 * definition stalled in ExecuteGather), so the helper is PARALLEL UNSAFE and a query
 * filtering on it stays serial.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"

const url = TestDatabase.postgresTestUrl("pg-json-valid-parallel")

describe.skipIf(url === undefined)("baton_json_valid under parallel query settings", () => {
  it.live("the helper is declared PARALLEL UNSAFE, so no parallel worker ever runs its exception block", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const schema = (yield* sql<{ name: string }>`SELECT current_schema() AS name`)[0]!.name
      const parallel = yield* sql<{ p: string }>`
        SELECT p.proparallel AS p FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = ${schema} AND p.proname = 'baton_json_valid'`
      expect(parallel.map((row) => row.p)).toEqual(["u"])
    }).pipe(Effect.provide(TestDatabase.layerPostgres(url!))))
})
