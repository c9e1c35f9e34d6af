/**
 * node.md 5.4 on PostgreSQL: a signal payload the wait's schema refuses is settled `rejected`, the
 * wait stays open, and the next valid signal (admitted as `baton signal` does, for the host's sweep)
 * is delivered and completes the run.
 */
import { describe, expect, it } from "@effect/vitest"
import * as TestDatabase from "@baton/database/TestDatabase"
import { type Context, Effect, Layer } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as PgSchema from "./support/pgSchema.js"
import { awaitStatus, expectCompleted, launch } from "./fixtures/runtimeSupport.js"
import { admit, payment, settled } from "./fixtures/signalSchema.js"

const url = TestDatabase.postgresTestUrl("waitForSignal schema refusal (layerPg)")

const inContext = <R>(context: Context.Context<R>) => <A, E>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, context)

describe.skipIf(url === undefined)("Step.waitForSignal with a schema on PostgreSQL", () => {
  it.scopedLive("a refused payload is rejected; the wait stays open for the next valid signal", () =>
    Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      const host = yield* Layer.build(
        NodeRuntime.layerPg({ url: url!, schema, flows: [payment], pollInterval: "100 millis", hostId: "pg-pay" })
      )
      yield* Effect.gen(function*() {
        const runId = yield* launch("payment", null)
        yield* awaitStatus(runId, ["parked"])
        yield* admit(runId, "p1", { amount: "bad" })
        expect(yield* settled("p1")).toBe("rejected")
        expect((yield* awaitStatus(runId, ["parked", "completed", "failed"])).status).toBe("parked")
        yield* admit(runId, "p2", { amount: 5 })
        expect(yield* settled("p2")).toBe("delivered")
        yield* expectCompleted(runId)
      }).pipe(inContext(host))
    }), 120_000)
})
