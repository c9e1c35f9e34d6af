/**
 * The journal-order scenario (runtime-journal-order-scenario.ts) on NodeRuntime.layerPg: the
 * executor's lossy flush before durable entries keeps seq order on PostgreSQL too.
 */
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as crypto from "node:crypto"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { orderScenario, ordered } from "./runtime-journal-order-scenario.js"

const url = TestDatabase.postgresTestUrl("node journal order (layerPg)")

describe.skipIf(url === undefined)("executor journal on PostgreSQL", () => {
  it.scopedLive("seq order: every step started < its checkpoints < its completed; parked after the step before it", () =>
    Effect.gen(function*() {
      const schema = `node_${crypto.randomBytes(12).toString("hex")}`
      yield* Effect.addFinalizer(() =>
        Effect.scoped(Effect.gen(function*() {
          const context = yield* Layer.build(PgDatabase.layer({ url: url!, schema }))
          const sql = Context.get(context, SqlClient.SqlClient)
          yield* sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
        })).pipe(Effect.ignore)
      )
      const host = yield* Layer.build(NodeRuntime.layerPg({ url: url!, schema, flows: [ordered], pollInterval: "100 millis" }))
      yield* Effect.provide(orderScenario, host)
    }), 60_000)
})
