/**
 * `TestControl.layer` is the SQL runtime over an in-memory database: its queues order, delay and pause
 * claims as SQL does, and its `now` option is the runtime's clock, run store stamps included.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Control from "../src/Control.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import * as Queues from "../src/Queues.js"
import * as TestControl from "../src/TestControl.js"
import { flows } from "./fixtures/facadeFlows.js"

const start = (input: unknown, options: Omit<Control.StartOptions, "principal"> = {}) =>
  Effect.flatMap(Control.Control, (control) => control.start({ flowId: "F", input, queue: "q", ...options }))

const claimed = (nowMs: number) =>
  Effect.flatMap(ControlRuntime.ControlRuntime, (runtime) => runtime.claimNext({ flowIds: ["F"], nowMs, limit: 10 })).pipe(
    Effect.map((result) => result.claimed.map((run) => run.summary.runId))
  )

describe("TestControl.layer", () => {
  it.effect("claims released runs by priority, highest first", () =>
    Effect.gen(function*() {
      const low = (yield* start({ n: 1 }, { priority: 1 })).runId
      const high = (yield* start({ n: 2 }, { priority: 5 })).runId
      const middle = (yield* start({ n: 3 }, { priority: 3 })).runId
      expect(yield* claimed(1_000)).toEqual([high, middle, low])
    }).pipe(Effect.provide(TestControl.layer({ flows }))))

  it.effect("does not claim a delayed run before its availability", () =>
    Effect.gen(function*() {
      const later = (yield* start({ n: 1 }, { availableAt: 5_000 })).runId
      expect(yield* claimed(4_999)).toEqual([])
      expect(yield* claimed(5_000)).toEqual([later])
    }).pipe(Effect.provide(TestControl.layer({ flows }))))

  it.effect("does not claim runs of a paused queue until it is resumed", () =>
    Effect.gen(function*() {
      const queues = yield* Queues.Queues
      const runId = (yield* start({ n: 1 })).runId
      yield* queues.pause("q")
      expect(yield* claimed(1_000)).toEqual([])
      yield* queues.resume("q")
      expect(yield* claimed(1_000)).toEqual([runId])
    }).pipe(Effect.provide(TestControl.layer({ flows }))))

  it.effect("now is the runtime's clock: principals and run rows are stamped with it", () =>
    Effect.gen(function*() {
      const runtime = yield* ControlRuntime.ControlRuntime
      const runId = (yield* start({ n: 1 })).runId
      expect((yield* runtime.stampPrincipal()).stampedAt).toBe(42_000)
      expect((yield* runtime.getRun(runId)).createdAt).toBe(42_000)
    }).pipe(Effect.provide(TestControl.layer({ flows, now: () => 42_000 }))))
})
