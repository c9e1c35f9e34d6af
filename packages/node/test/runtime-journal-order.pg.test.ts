/**
 * The journal-order scenario (runtime-journal-order-scenario.ts) on NodeRuntime.layerPg: the
 * executor's lossy flush before durable entries keeps seq order on PostgreSQL too.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as PgSchema from "./support/pgSchema.js"
import { orderScenario, ordered } from "./runtime-journal-order-scenario.js"

const url = TestDatabase.postgresTestUrl("node journal order (layerPg)")

describe.skipIf(url === undefined)("executor journal on PostgreSQL", () => {
  it.scopedLive("seq order: every step started < its checkpoints < its completed; parked after the step before it", () =>
    Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      const host = yield* Layer.build(NodeRuntime.layerPg({ url: url!, schema, flows: [ordered], pollInterval: "100 millis" }))
      yield* Effect.provide(orderScenario, host)
    }), 60_000)
})
