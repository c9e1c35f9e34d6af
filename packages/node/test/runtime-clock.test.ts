/**
 * B-007 at the host (node.md 4.4, check 12 in part): when this host's wall clock moves back,
 * its beats stop extending the stored lease, the heartbeat loop lapses on the monotonic clock,
 * and the drive ends `lease-lost`, interrupting the handler and releasing the run
 * (`baton.run.released { reason: "lease-lapsed" }`) so no peer has to wait for staleness.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import { Chunk, Clock, Effect, Fiber, Schema, Stream } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Step from "../src/Step.js"
import { awaitStatus, launch } from "./fixtures/runtimeSupport.js"

const skew = { ms: 0 }
const live = Clock.make()
/** Wall readings follow `skew`; monotonic time and timers stay the live clock's. */
const skewed: Clock.Clock = {
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => live.unsafeCurrentTimeMillis() - skew.ms,
  currentTimeMillis: Effect.sync(() => live.unsafeCurrentTimeMillis() - skew.ms),
  unsafeCurrentTimeNanos: () => live.unsafeCurrentTimeNanos(),
  currentTimeNanos: live.currentTimeNanos,
  sleep: (duration) => live.sleep(duration)
}

const hold = Flow.make({
  id: "clock.hold",
  description: "holds",
  version: "1",
  input: Schema.Unknown,
  handler: () => Step.run("hold", Effect.as(Effect.sleep("120 seconds"), 1))
})

describe("runtime: wall clock moving back (B-007)", () => {
  it.live("the lease lapses within the write tolerance and the run is released lease-lapsed", () =>
    Effect.gen(function*() {
      const host = yield* NodeRuntime.NodeHost
      const lapsed = yield* Effect.fork(
        Stream.runCollect(host.events.pipe(Stream.filter((e) => e._tag === "lapsed"), Stream.take(1)))
      )
      const runId = yield* launch("clock.hold", null)
      yield* awaitStatus(runId, ["running"])
      yield* Effect.sleep("1500 millis")
      skew.ms = 60_000
      const events = yield* Fiber.join(lapsed).pipe(Effect.timeout("40 seconds"))
      expect(Chunk.toReadonlyArray(events)).toEqual([{ _tag: "lapsed", runId }])
      const journal = yield* Effect.flatMap(Journal.Journal, (j) => j.entries({ runId: runId as never, limit: 100 }))
      const released = journal.entries.find((e) => e.eventType === "baton.run.released")
      expect(released?.payload).toEqual({ reason: "lease-lapsed", drive: 1 })
      const attempts = yield* Effect.flatMap(AttemptStore.AttemptStore, (s) => s.list(runId))
      const first = attempts.find((a) => (a.meta as { name: string }).name === "hold" && a.attempt === 0)
      expect(first?.state).toBe("interrupted")
      skew.ms = 0
    }).pipe(
      Effect.provide(NodeRuntime.layerTest({ flows: [hold], pollInterval: "10 seconds", shutdownGrace: "5 seconds", drainTimeout: "1 second" })),
      Effect.withClock(skewed)
    ), 90_000)
})
