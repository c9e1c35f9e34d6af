import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { journalFenceSuite, journalHost } from "./suites/journalFences.js"

const url = TestDatabase.postgresTestUrl("run-store journal fences")

/** Two pools on one fresh schema: the first creates it (dropped with the scope), the second joins it. */
const twoHosts = Effect.gen(function*() {
  const one = yield* Layer.build(journalHost(TestDatabase.layerPostgres(url!)))
  const [row] = yield* Context.get(one, SqlClient.SqlClient)<{ schema: string }>`SELECT current_schema() AS schema`
  const two = yield* Layer.build(journalHost(PgDatabase.layer({ url: url!, schema: row!.schema })))
  return [one, two] as const
})

describe.skipIf(url === undefined)("the journal fenced through the run row (PostgreSQL)", () =>
  journalFenceSuite("PostgreSQL", () => TestDatabase.layerPostgres(url!), twoHosts, 60_000))
