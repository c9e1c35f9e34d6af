/**
 * Check 36: outcome counters (global registry, measured before/after).
 */
import * as Journal from "@baton/journal/Journal"
import * as RunStore from "@baton/run-store/RunStore"
import * as RunStoreMetrics from "@baton/run-store/RunStoreMetrics"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric, TestClock } from "effect"
import { A, B, ev, pending, running, sqliteStack } from "./support/stack.js"

const count = (metric: Metric.Metric.Counter<number>) => Effect.map(Metric.value(metric), (state) => state.count)

describe("metrics", () => {
  it.effect("36: counters move by outcome; throughput only on committed terminal transitions", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const journal = yield* Journal.Journal
      const notFound = yield* count(RunStoreMetrics.heartbeat.NotFound)
      yield* store.heartbeat("missing", A, 0)
      expect((yield* count(RunStoreMetrics.heartbeat.NotFound)) - notFound).toBe(1)

      yield* store.create("r", "{}")
      yield* store.claimAndOwn("r", pending, A, 0)
      yield* TestClock.setTime(31_000)
      const claimed = yield* count(RunStoreMetrics.steal.Claimed)
      yield* store.steal("r", running(A, 0), B, 31_000, ev(A, B, 31_000))
      expect((yield* count(RunStoreMetrics.steal.Claimed)) - claimed).toBe(1)

      const completed = Metric.tagged(RunStoreMetrics.transition.Transitioned, "to", "completed")
      const transitioned = yield* count(completed)
      const throughput = yield* count(RunStoreMetrics.runThroughput)
      yield* store.transitionOwned("r", A, "completed")
      expect((yield* count(completed)) - transitioned).toBe(1)
      expect((yield* count(RunStoreMetrics.runThroughput)) - throughput).toBe(1)

      yield* store.create("s", "{}")
      yield* store.claimAndOwn("s", pending, A, 31_000)
      const beforeRollback = yield* count(RunStoreMetrics.runThroughput)
      yield* Effect.either(journal.transact(Effect.zipRight(store.transitionOwned("s", A, "completed"), Effect.fail("no"))))
      expect((yield* count(RunStoreMetrics.runThroughput)) - beforeRollback).toBe(0)
      expect((yield* store.get("s")).status).toBe("running")
    }).pipe(Effect.provide(sqliteStack())))

  it("snake-cases outcome tags", () => {
    expect(RunStoreMetrics.snakeCase("HeartbeatFresh")).toBe("heartbeat_fresh")
    expect(RunStoreMetrics.snakeCase("LivenessUnconfirmed")).toBe("liveness_unconfirmed")
  })
})
