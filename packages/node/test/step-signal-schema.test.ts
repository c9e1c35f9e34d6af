/**
 * node.md 5.4: a signal payload the wait's schema refuses is settled `rejected` and the wait stays
 * open, so the next valid signal is delivered and the run continues — whether the command reaches
 * the host through its sweep (as `baton signal` does) or through the in-process facade.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Control from "@baton/control/Control"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import { Effect, Schedule, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { awaitStatus, expectCompleted, launch } from "./fixtures/runtimeSupport.js"
import { admit, payment, settled } from "./fixtures/signalSchema.js"

let release: () => void = () => undefined
const held = new Promise<void>((resolve) => {
  release = resolve
})

/** A run that holds its host's only slot until the test releases it. */
const hold = Flow.make({
  id: "hold",
  description: "holds a run slot",
  version: "1",
  input: Schema.Unknown,
  handler: () => Effect.as(Effect.promise(() => held), null)
})

const resultOf = (runId: string) =>
  Effect.flatMap(AttemptStore.AttemptStore, (store) => store.list(runId)).pipe(
    Effect.map((attempts) => attempts.find((a) => (a.meta as { name?: string }).name === "$result")?.outcome)
  )

describe("Step.waitForSignal with a schema", () => {
  it.live("a refused payload delivered by the sweep is rejected; the wait stays open for the next signal", () =>
    Effect.gen(function*() {
      const runId = yield* launch("payment", null)
      yield* awaitStatus(runId, ["parked"])
      yield* admit(runId, "s1", { amount: "bad" })
      expect(yield* settled("s1")).toBe("rejected")
      const reparked = yield* awaitStatus(runId, ["parked", "completed", "failed"])
      expect(reparked.status).toBe("parked")
      expect(reparked.pendingWaits?.[0]).toMatchObject({ reason: "event", name: "payment" })
      yield* admit(runId, "s2", { amount: 5 })
      expect(yield* settled("s2")).toBe("delivered")
      yield* expectCompleted(runId)
      expect(yield* resultOf(runId)).toEqual({ value: { amount: 5 } })
    }).pipe(Effect.provide(NodeRuntime.layerTest({ pollInterval: "100 millis", flows: [payment] }))))

  it.live("a refused payload signalled through the facade is rejected; a later valid one completes the run", () =>
    Effect.gen(function*() {
      const control = yield* Control.Control
      const runtime = yield* ControlRuntime.ControlRuntime
      const runId = yield* launch("payment", null)
      yield* awaitStatus(runId, ["parked"])
      const signal = (key: string, payload: unknown) =>
        control.signal({ runId, signal: { name: "payment", payload: payload as never }, idempotencyKey: key })
      expect((yield* signal("f1", { amount: "bad" }))._tag).toBe("Accepted")
      yield* Effect.retry(
        Effect.filterOrFail(runtime.signalCommands({ runId }), (all) => all.every((c) => c.state !== "pending")),
        Schedule.spaced("50 millis")
      )
      expect((yield* awaitStatus(runId, ["parked", "completed", "failed"])).status).toBe("parked")
      expect((yield* signal("f2", { amount: 6 }))._tag).toBe("Accepted")
      yield* expectCompleted(runId)
      expect(yield* resultOf(runId)).toEqual({ value: { amount: 6 } })
      expect((yield* runtime.signalCommands({ runId })).map((c) => c.state)).toEqual(["rejected", "delivered"])
    }).pipe(Effect.provide(NodeRuntime.layerTest({ pollInterval: "100 millis", flows: [payment] }))))

  it.live("two refused payloads in a row keep the wait open", () =>
    Effect.gen(function*() {
      const runId = yield* launch("payment", null)
      yield* awaitStatus(runId, ["parked"])
      yield* admit(runId, "b1", { amount: "bad" })
      expect(yield* settled("b1")).toBe("rejected")
      yield* awaitStatus(runId, ["parked"])
      yield* admit(runId, "b2", { nope: true })
      expect(yield* settled("b2")).toBe("rejected")
      yield* awaitStatus(runId, ["parked"])
      yield* admit(runId, "g1", { amount: 7 })
      expect(yield* settled("g1")).toBe("delivered")
      yield* expectCompleted(runId)
      expect(yield* resultOf(runId)).toEqual({ value: { amount: 7 } })
    }).pipe(Effect.provide(NodeRuntime.layerTest({ pollInterval: "100 millis", flows: [payment] }))))

  it.live("a signal offered while the wait's token is held by an unjudged command stays pending, then is delivered", () =>
    Effect.gen(function*() {
      const runtime = yield* ControlRuntime.ControlRuntime
      const runId = yield* launch("payment", null)
      yield* awaitStatus(runId, ["parked"])
      // The only run slot is taken, so the host binds h1 to the wait but cannot drive the run yet.
      const holder = yield* launch("hold", null)
      yield* awaitStatus(holder, ["running"])
      yield* admit(runId, "h1", { amount: "bad" })
      yield* admit(runId, "h2", { amount: 9 })
      yield* Effect.sleep("600 millis")
      expect((yield* runtime.signalCommands({ runId })).map((c) => c.state)).toEqual(["pending", "pending"])
      yield* Effect.sync(() => release())
      yield* expectCompleted(holder)
      yield* expectCompleted(runId)
      expect(yield* resultOf(runId)).toEqual({ value: { amount: 9 } })
      expect(yield* settled("h1")).toBe("rejected")
      expect(yield* settled("h2")).toBe("delivered")
    }).pipe(Effect.provide(NodeRuntime.layerTest({ pollInterval: "100 millis", maxRuns: 1, flows: [payment, hold] }))))

  it.live("a refused and a valid payload sent together: the valid one is delivered", () =>
    Effect.gen(function*() {
      const runId = yield* launch("payment", null)
      yield* awaitStatus(runId, ["parked"])
      yield* admit(runId, "t1", { amount: "bad" })
      yield* admit(runId, "t2", { amount: 8 })
      yield* expectCompleted(runId)
      expect(yield* resultOf(runId)).toEqual({ value: { amount: 8 } })
      expect(yield* settled("t1")).toBe("rejected")
      expect(yield* settled("t2")).toBe("delivered")
    }).pipe(Effect.provide(NodeRuntime.layerTest({ pollInterval: "100 millis", flows: [payment] }))))
})
