/**
 * `baton doctor` sees live hosts by their presence rows (PostgreSQL): an idle host serving a flow, a
 * killed host until its row is stale, no host once one shut down gracefully.
 */
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import { afterAll, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "@effect/sql/SqlClient"
import {
  gracefulShutdownRemovesRow,
  idleHostServesLaunchedRun,
  killedHostStopsCountingOnceStale,
  type Target
} from "./cli-doctor-presence-scenario.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("node doctor host presence")
const schemas: Array<string> = []

const pg = (): Target => {
  const schema = PgSchema.freshName()
  schemas.push(schema)
  return { host: { url: url!, schema }, flags: ["--pg", url!, "--schema", schema], database: PgDatabase.layer({ url: url!, schema }) }
}

describe.skipIf(url === undefined)("baton doctor and host presence (PostgreSQL)", () => {
  afterAll(async () => {
    for (const schema of schemas) {
      await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(PgDatabase.layer({ url: url!, schema }))
        yield* Context.get(context, SqlClient.SqlClient).unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      })).pipe(Effect.ignore))
    }
  })

  it("an idle host whose presence row lists the flow serves a just-launched run: no problem reported", () =>
    idleHostServesLaunchedRun(pg()), 120_000)

  it("a host killed with SIGKILL counts until its presence row is older than the stale cutoff", () =>
    killedHostStopsCountingOnceStale(pg()), 120_000)

  it("a host's graceful shutdown deletes its presence row, so its flow is unserved at once", () =>
    gracefulShutdownRemovesRow(pg()), 120_000)
})
