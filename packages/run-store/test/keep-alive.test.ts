/**
 * Check 23: the owner heartbeat loop's pacing, budget and endings, under TestClock.
 */
import * as Heartbeat from "@baton/run-store/Heartbeat"
import * as RunStore from "@baton/run-store/RunStore"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Effect, Exit, Fiber, HashMap, Layer, Logger, Option, TestClock } from "effect"
import { A, B, ev, pending, running, sqliteStack } from "./support/stack.js"

interface Logged {
  readonly message: string
  readonly annotations: Record<string, unknown>
}

const capture = () => {
  const logs: Array<Logged> = []
  const logger = Logger.make(({ annotations, message }) => {
    logs.push({
      message: String(Array.isArray(message) ? message[0] : message),
      annotations: Object.fromEntries(HashMap.toEntries(annotations))
    })
  })
  return { logs, layer: Logger.replace(Logger.defaultLogger, logger) }
}

const failing = Effect.fail(
  new RunStore.RunStoreError({ code: "persistence_failed", method: "heartbeat", message: "down", cause: null })
)

const settle = Effect.repeatN(Effect.yieldNow(), 20)

const isDone = (fiber: Fiber.RuntimeFiber<unknown, unknown>) => Effect.map(Fiber.poll(fiber), Option.isSome)

describe("Heartbeat.keepAlive", () => {
  // Reconfirm failing at once lapses at the 19 s mark; one that never answers is given
  // until 20 s after the last confirmed beat, no longer.
  for (
    const [title, reconfirm, lapseAt] of [
      ["with failing writes the work is interrupted at exactly 19,000 ms", () => failing, 19_000],
      ["a reconfirm that never answers is given until 20,000 ms, no longer", () => Effect.never, 20_000]
    ] as const
  ) {
    it.effect(`23: ${title}`, () => {
      const { layer, logs } = capture()
      return Effect.gen(function*() {
        const work = yield* Effect.fork(Effect.never)
        const loop = yield* Effect.fork(Heartbeat.keepAlive("r", A, work, { heartbeatAtMs: 0 }))
        yield* TestClock.adjust(lapseAt - 1)
        yield* settle
        expect(yield* isDone(work)).toBe(false)
        yield* TestClock.adjust(1)
        yield* settle
        const exit = yield* Fiber.await(work)
        expect(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)).toBe(true)
        expect(yield* Fiber.join(loop)).toEqual({ _tag: "Lapsed", unconfirmedMs: lapseAt })
        expect(logs.filter((l) => l.message === "run heartbeat write failed").length).toBe(1)
        const lapsed = logs.filter((l) => l.message === "run lease lapsed; interrupting owned work")
        expect(lapsed.length).toBe(1)
        expect(lapsed[0]!.annotations).toMatchObject({ runId: "r", unconfirmedMs: lapseAt })
      }).pipe(
        Effect.provide(Layer.merge(RunStore.layerNoop({ heartbeat: () => failing, reconfirm }), layer))
      )
    })
  }

  it.effect("23: a confirmed beat at 18 s re-arms the budget to 37 s; onLapse sees the unconfirmed time", () =>
    Effect.gen(function*() {
      let lapsedWith = -1
      const store = RunStore.makeNoop({
        heartbeat: (_id, _owner, nowMs) =>
          nowMs === 18_000 ? Effect.succeed({ _tag: "Updated", heartbeatAtMs: nowMs }) : failing,
        reconfirm: () => failing
      })
      const work = yield* Effect.fork(Effect.never)
      const loop = yield* Effect.fork(
        Heartbeat.keepAlive("r", A, work, {
          heartbeatAtMs: 0,
          onLapse: (ms) => Effect.sync(() => (lapsedWith = ms))
        }).pipe(Effect.provideService(RunStore.RunStore, store))
      )
      yield* TestClock.adjust(36_999)
      yield* settle
      expect(yield* isDone(work)).toBe(false)
      yield* TestClock.adjust(1)
      yield* settle
      expect(yield* isDone(work)).toBe(true)
      expect(yield* Fiber.join(loop)).toEqual({ _tag: "Lapsed", unconfirmedMs: 19_000 })
      expect(lapsedWith).toBe(19_000)
    }))

  it.effect("23: beats that do not raise the stored stamp never extend the budget", () =>
    Effect.gen(function*() {
      let stored = 0
      const store = RunStore.makeNoop({
        heartbeat: (_id, _owner, nowMs) =>
          Effect.sync(() => {
            stored = Math.max(stored, nowMs)
            return { _tag: "Updated", heartbeatAtMs: stored } as const
          }),
        reconfirm: (_id, _owner, nowMs) =>
          Effect.sync(() => ({ _tag: "Updated", heartbeatAtMs: Math.max(stored, nowMs) } as const))
      })
      const test = yield* Clock.clockWith(Effect.succeed)
      // Wall time jumps 60 s back after 5 s; monotonic time and sleeps follow TestClock.
      const shift = (ms: number) => ms > 5_000 ? ms - 60_000 : ms
      const shifted: Clock.Clock = {
        [Clock.ClockTypeId]: Clock.ClockTypeId,
        unsafeCurrentTimeMillis: () => shift(test.unsafeCurrentTimeMillis()),
        currentTimeMillis: Effect.map(test.currentTimeMillis, shift),
        unsafeCurrentTimeNanos: () => test.unsafeCurrentTimeNanos(),
        currentTimeNanos: test.currentTimeNanos,
        sleep: (duration) => test.sleep(duration)
      }
      const work = yield* Effect.fork(Effect.never)
      const loop = yield* Effect.fork(
        Heartbeat.keepAlive("r", A, work, { heartbeatAtMs: 0 }).pipe(
          Effect.provideService(RunStore.RunStore, store),
          Effect.withClock(shifted)
        )
      )
      yield* TestClock.adjust(23_999)
      yield* settle
      expect(stored).toBe(5_000)
      expect(yield* isDone(work)).toBe(false)
      yield* TestClock.adjust(1)
      yield* settle
      expect(yield* isDone(work)).toBe(true)
      expect(yield* Fiber.join(loop)).toEqual({ _tag: "Lapsed", unconfirmedMs: 19_000 })
    }))

  it.effect("23: FenceLost interrupts the work at once and ends Lost without onLapse", () =>
    Effect.gen(function*() {
      let lapsed = false
      const store = RunStore.makeNoop({ heartbeat: () => Effect.succeed({ _tag: "FenceLost" }) })
      const work = yield* Effect.fork(Effect.never)
      const loop = yield* Effect.fork(
        Heartbeat.keepAlive("r", A, work, { heartbeatAtMs: 0, onLapse: () => Effect.sync(() => (lapsed = true)) })
          .pipe(Effect.provideService(RunStore.RunStore, store))
      )
      yield* TestClock.adjust(1_000)
      yield* settle
      expect(yield* isDone(work)).toBe(true)
      expect(yield* Fiber.join(loop)).toEqual({ _tag: "Lost", outcome: "FenceLost" })
      expect(lapsed).toBe(false)
    }))

  it.effect("23: the loop keeps beating after the work ended, until its caller interrupts it", () =>
    Effect.gen(function*() {
      let beats = 0
      const store = RunStore.makeNoop({
        heartbeat: (_id, _owner, nowMs) =>
          Effect.sync(() => {
            beats++
            return { _tag: "Updated", heartbeatAtMs: nowMs } as const
          })
      })
      const work = yield* Effect.fork(Effect.void)
      yield* Fiber.await(work)
      const loop = yield* Effect.fork(
        Heartbeat.keepAlive("r", A, work, { heartbeatAtMs: 0 }).pipe(Effect.provideService(RunStore.RunStore, store))
      )
      yield* TestClock.adjust(60_000)
      yield* settle
      expect(beats).toBe(60)
      expect(yield* isDone(loop)).toBe(false)
      yield* Fiber.interrupt(loop)
      yield* TestClock.adjust(5_000)
      yield* settle
      expect(beats).toBe(60)
    }))

  it.effect("23: over the real store with failing writes, a peer takes over strictly after 30 s", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      expect(yield* store.claimAndOwn("r", pending, A, 0)).toEqual({ _tag: "Activated" })
      const work = yield* Effect.fork(Effect.never)
      const broken: RunStore.Service = { ...store, heartbeat: () => failing, reconfirm: () => failing }
      const loop = yield* Effect.fork(
        Heartbeat.keepAlive("r", A, work).pipe(Effect.provideService(RunStore.RunStore, broken))
      )
      yield* TestClock.adjust(19_000)
      yield* settle
      expect(yield* isDone(work)).toBe(true)
      expect((yield* Fiber.join(loop))._tag).toBe("Lapsed")
      yield* TestClock.setTime(30_000)
      expect(yield* store.steal("r", running(A, 0), B, 30_000, ev(A, B, 30_000))).toEqual({ _tag: "HeartbeatFresh" })
      yield* TestClock.setTime(30_001)
      expect(yield* store.steal("r", running(A, 0), B, 30_001, ev(A, B, 30_001))).toEqual({
        _tag: "Claimed",
        claimedAtMs: 30_001
      })
    }).pipe(Effect.provide(sqliteStack())))

  it.effect("keepAlive confirms real beats against the SQL store and re-arms", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      yield* store.claimAndOwn("r", pending, A, 0)
      const work = yield* Effect.fork(Effect.never)
      const loop = yield* Effect.fork(Heartbeat.keepAlive("r", A, work))
      yield* TestClock.adjust(45_000)
      yield* settle
      expect(yield* isDone(work)).toBe(false)
      expect((yield* store.get("r")).heartbeatAtMs).toBe(45_000)
      yield* Fiber.interrupt(loop)
      yield* Fiber.interrupt(work)
    }).pipe(Effect.provide(sqliteStack())))
})
