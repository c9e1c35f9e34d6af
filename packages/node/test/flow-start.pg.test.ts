/**
 * Flow.start / startMany / await on PostgreSQL: numbers from sequences, keys, retry and results.
 */
import { describe, expect, it } from "@effect/vitest"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as Control from "@baton/control/Control"
import * as Queues from "@baton/control/Queues"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { type Context, Effect, Layer, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Step from "../src/Step.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("Flow.start on PostgreSQL (layerPg)")

const inContext = <R>(context: Context.Context<R>) => <A, E>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, context)

let calls = 0
const square = Flow.make({
  id: "pg.square",
  description: "squares n, failing the first attempt when asked",
  version: "1",
  input: Schema.Struct({ n: Schema.Number, failFirst: Schema.optional(Schema.Boolean) }),
  retry: { maxAttempts: 2, initial: "20 millis", jitter: false },
  handler: ({ failFirst, n }) =>
    Effect.gen(function*() {
      const squared = yield* Step.run("square", Effect.succeed(n * n))
      calls++
      if (failFirst === true && calls === 1) return yield* Effect.fail({ _tag: "Flaky", message: "first attempt" })
      return squared
    })
})

describe.skipIf(url === undefined)("Flow.start on PostgreSQL", () => {
  it.scopedLive("start, startMany, keys, retry and await", () =>
    Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      const host = yield* Layer.build(
        NodeRuntime.layerPg({ url: url!, schema, flows: [square], pollInterval: "100 millis", hostId: "pg-start" })
      )
      yield* Effect.gen(function*() {
        const one = yield* Flow.start(square, { n: 7 }, { idempotencyKey: "seven" })
        expect(yield* Flow.await(one, { timeout: "30 seconds" })).toEqual(Flow.Outcome.Completed({ runId: one.runId, value: 49 }))
        const again = yield* Flow.start(square, { n: 7 }, { idempotencyKey: "seven" })
        expect([again.runId, again.created]).toEqual([one.runId, false])
        const sql = yield* SqlClient.SqlClient
        const runsBefore = yield* sql<{ n: string }>`SELECT COUNT(*) AS n FROM flows_runs`
        const conflict = yield* Effect.flip(Flow.start(square, { n: 8 }, { idempotencyKey: "seven" }))
        expect(conflict._tag).toBe("IdempotencyConflict")
        expect(yield* sql<{ n: string }>`SELECT COUNT(*) AS n FROM flows_runs`).toEqual(runsBefore)

        const many = yield* Flow.startMany(square, Array.from({ length: 30 }, (_, n) => ({ n })))
        expect(new Set(many.map((h) => h.runId)).size).toBe(30)
        const values = yield* Effect.forEach(many, (h) => Flow.await(h, { timeout: "60 seconds" }), { concurrency: 30 })
        expect(values.map((o) => (o._tag === "Completed" ? o.value : -1))).toEqual(many.map((_, n) => n * n))

        calls = 0
        const flaky = yield* Flow.start(square, { n: 3, failFirst: true })
        expect(yield* Flow.await(flaky, { timeout: "30 seconds" })).toEqual(Flow.Outcome.Completed({ runId: flaky.runId, value: 9 }))
        expect(calls).toBe(2)
        const summary = yield* (yield* Control.Control).getRun(flaky.runId)
        expect(summary.result).toBe(9)
      }).pipe(inContext(host))
    }), 180_000)

  it.scopedLive("startMany of 1,000 runs is a dozen statements or so, and the host takes them in creation order", () =>
    Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      const host = yield* Layer.build(
        NodeRuntime.layerPg({ url: url!, schema, flows: [square], pollInterval: "100 millis", hostId: "pg-many" })
      )
      yield* Effect.gen(function*() {
        const sent: Array<string> = []
        const handles = yield* Statement.withTransformer(
          Flow.startMany(square, Array.from({ length: 1_000 }, (_, n) => ({ n }))),
          (self) => {
            sent.push(self.compile()[0])
            return Effect.succeed(self)
          }
        )
        expect(new Set(handles.map((h) => h.runId)).size).toBe(1_000)
        expect(sent.length).toBeLessThanOrEqual(16)
        // The first runs of the batch, which the host takes first; the SQLite suite drains all 1,000.
        const first = handles.slice(0, 60)
        const values = yield* Effect.forEach(first, (h) => Flow.await(h, { timeout: "120 seconds" }), { concurrency: 60 })
        expect(values.map((o) => (o._tag === "Completed" ? o.value : -1))).toEqual(first.map((_, n) => n * n))
      }).pipe(inContext(host))
    }), 240_000)

  it.scopedLive("a start in a client process wakes an idle host through the work channel, not its sweep", () =>
    Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      // The host sweeps every 10 s: only the notification can get the run driven sooner.
      const host = yield* Layer.build(
        NodeRuntime.layerPg({ url: url!, schema, flows: [square], pollInterval: "10 seconds", hostId: "pg-idle" })
      )
      yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(host))
      const client = yield* Layer.build(NodeRuntime.layerPg({ url: url!, schema, flows: [square], mode: "client" }))
      yield* Effect.gen(function*() {
        yield* Effect.sleep("500 millis")
        const handle = yield* Flow.start(square, { n: 12 })
        const outcome = yield* Flow.await(handle, { timeout: "6 seconds", pollInterval: "100 millis" })
        expect(outcome).toEqual(Flow.Outcome.Completed({ runId: handle.runId, value: 144 }))
      }).pipe(inContext(client))
    }), 60_000)

  it.scopedLive("a queue resumed by a client wakes an idle host through the work channel, not its sweep", () =>
    Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      const client = yield* Layer.build(NodeRuntime.layerPg({ url: url!, schema, flows: [square], mode: "client" }))
      const queues = yield* Queues.Queues.pipe(inContext(client))
      yield* queues.pause("held")
      const handle = yield* Flow.start(square, { n: 5 }, { queue: "held" }).pipe(inContext(client))
      // The host sweeps every 10 s: only the resume's notification can get the run driven sooner.
      const host = yield* Layer.build(
        NodeRuntime.layerPg({ url: url!, schema, flows: [square], pollInterval: "10 seconds", hostId: "pg-resume" })
      )
      yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(host))
      yield* Effect.sleep("500 millis")
      const held = yield* Effect.flatMap(Control.Control, (control) => control.getRun(handle.runId)).pipe(inContext(client))
      expect(held.status).not.toBe("completed")
      yield* queues.resume("held")
      const outcome = yield* Flow.await(handle, { timeout: "6 seconds", pollInterval: "100 millis" }).pipe(inContext(client))
      expect(outcome).toEqual(Flow.Outcome.Completed({ runId: handle.runId, value: 25 }))
    }), 60_000)
})
