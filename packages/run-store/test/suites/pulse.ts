/**
 * The host pulse under TestClock: `keepAlive` loops sharing one `Heartbeat.Pulse` renew all
 * their runs with one statement per interval (per 1,000 runs), a lost run stops at once while
 * the others keep running, and the lapse rules are those of a loop that beats alone.
 */
import * as Heartbeat from "@baton/run-store/Heartbeat"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, HashMap, Logger, Option, Scope, TestClock } from "effect"
import { insertOwned, stamps } from "../support/bulk.js"
import { heartbeatUpdates, sqlLog } from "../support/capture.js"
import { A, type MakeStack } from "../support/stack.js"

/** Owners as a host has them: one host and pid, each claim its own nonce. */
const ownerOf = (i: number) => ({ hostId: A.hostId, pid: A.pid, nonce: `claim-${i}` })

const failing = Effect.fail(
  new RunStore.RunStoreError({ code: "persistence_failed", method: "heartbeatLeases", message: "down", cause: null })
)

/**
 * Lets the loops woken by a clock step finish: yields, then (for a statement on a server)
 * waits in real time until `done` holds, failing after 10 s.
 */
const settleUntil = (done: Effect.Effect<boolean, unknown, any> = Effect.succeed(true)) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 10_000
    while (true) {
      yield* Effect.repeatN(Effect.yieldNow(), 20)
      if (yield* done) return
      if (Date.now() > deadline) return yield* Effect.dieMessage("settleUntil: condition not reached in 10 s")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
  })

const isDone = (fiber: Fiber.RuntimeFiber<unknown, unknown>) => Effect.map(Fiber.poll(fiber), Option.isSome)

/** Forks one idle work fiber and its `keepAlive` per run, all on `pulse`, with `store`. */
const keepAll = (ids: ReadonlyArray<string>, pulse: Heartbeat.PulseService, store: RunStore.Service) =>
  Effect.forEach(ids, (runId, i) =>
    Effect.gen(function*() {
      const work = yield* Effect.fork(Effect.never)
      const loop = yield* Effect.fork(
        Heartbeat.keepAlive(runId, ownerOf(i), work, { heartbeatAtMs: 0 }).pipe(
          Effect.provideService(Heartbeat.Pulse, pulse),
          Effect.provideService(RunStore.RunStore, store)
        )
      )
      return { runId, work, loop }
    }))

export const pulseSuite = (makeStack: MakeStack) => {
  const run = <X, E>(effect: Effect.Effect<X, E, any>) => Effect.scoped(Effect.provide(effect, makeStack()))

  const allStamped = (ids: ReadonlyArray<string>, atMs: number) =>
    Effect.map(stamps(ids), (stored) => ids.every((id) => stored.get(id) === atMs))

  it.effect("runs of many claims renew with one statement per interval", () => {
    const log = sqlLog()
    return run(log.within(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = Array.from({ length: 25 }, (_, i) => `p-${i}`)
      yield* insertOwned(ids, ownerOf)
      const pulse = yield* Heartbeat.makePulse
      const loops = yield* keepAll(ids, pulse, store)
      yield* settleUntil()
      const before = heartbeatUpdates(log.statements)
      for (const second of [1, 2, 3]) {
        yield* TestClock.adjust(1_000)
        yield* settleUntil(allStamped(ids, second * 1_000))
        expect(heartbeatUpdates(log.statements) - before).toBe(second)
      }
      for (const { work } of loops) expect(yield* isDone(work)).toBe(false)
    })))
  })

  it.effect("above 1,000 runs each interval sends one statement per 1,000 and renews them all", () => {
    const log = sqlLog()
    return run(log.within(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = Array.from({ length: 1_205 }, (_, i) => `big-${i}`)
      yield* insertOwned(ids, ownerOf)
      const pulse = yield* Heartbeat.makePulse
      yield* keepAll(ids, pulse, store)
      yield* settleUntil()
      const before = heartbeatUpdates(log.statements)
      yield* TestClock.adjust(1_000)
      yield* settleUntil(allStamped(ids, 1_000))
      yield* TestClock.adjust(1_000)
      yield* settleUntil(allStamped(ids, 2_000))
      expect(heartbeatUpdates(log.statements) - before).toBe(4)
    })))
  })

  it.effect("a run lost in the batch is interrupted at once while the others keep running", () => {
    const log = sqlLog()
    return run(log.within(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      const ids = Array.from({ length: 6 }, (_, i) => `l-${i}`)
      yield* insertOwned(ids, ownerOf)
      const pulse = yield* Heartbeat.makePulse
      const loops = yield* keepAll(ids, pulse, store)
      yield* settleUntil()
      yield* TestClock.adjust(1_000)
      yield* settleUntil(allStamped(ids, 1_000))
      // Run 1 is taken over by another claim of the same host; run 4 is suspended by its owner.
      yield* sql`UPDATE flows_runs SET owner_nonce = 'someone-else' WHERE run_id = 'l-1'`
      expect(yield* store.transitionOwned("l-4", ownerOf(4), "suspended")).toEqual({ _tag: "Transitioned" })
      const before = heartbeatUpdates(log.statements)
      yield* TestClock.adjust(1_000)
      const lost = [loops[1]!, loops[4]!]
      yield* settleUntil(Effect.map(Effect.forEach(lost, (l) => isDone(l.loop)), (done) => done.every(Boolean)))
      for (const l of lost) {
        expect(yield* Fiber.join(l.loop)).toEqual({ _tag: "Lost", outcome: "FenceLost" })
        expect(yield* isDone(l.work)).toBe(true)
      }
      const kept = loops.filter((_, i) => i !== 1 && i !== 4)
      yield* settleUntil(allStamped(kept.map((l) => l.runId), 2_000))
      yield* TestClock.adjust(1_000)
      yield* settleUntil(allStamped(kept.map((l) => l.runId), 3_000))
      expect(heartbeatUpdates(log.statements) - before).toBe(2)
      for (const l of kept) {
        expect(yield* isDone(l.work)).toBe(false)
        expect(yield* isDone(l.loop)).toBe(false)
      }
    })))
  })

  it.effect("a lease the store refuses stays out of the batch: the others renew, its own loop lapses", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = ["ok-0", "ok-1"]
      yield* insertOwned(ids, ownerOf)
      const pulse = yield* Heartbeat.makePulse
      const loops = yield* keepAll([...ids, ""], pulse, store)
      for (let second = 1; second <= 19; second++) {
        yield* TestClock.adjust(1_000)
        yield* settleUntil(allStamped(ids, second * 1_000))
      }
      yield* settleUntil(isDone(loops[2]!.loop))
      expect(yield* Fiber.join(loops[2]!.loop)).toEqual({ _tag: "Lapsed", unconfirmedMs: 19_000 })
      for (const { work } of loops.slice(0, 2)) expect(yield* isDone(work)).toBe(false)
    })))

  it.effect("a loop registering with an earlier budget than the others lapses on its own time", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = ["e-0", "e-1"]
      yield* insertOwned(ids, ownerOf)
      const pulse = yield* Heartbeat.makePulse
      const renewing = yield* keepAll(ids, pulse, store)
      for (let second = 1; second <= 20; second++) {
        yield* TestClock.adjust(1_000)
        yield* settleUntil(allStamped(ids, second * 1_000))
      }
      // The watcher woke at 19 s and, the others renewed since, sleeps until 38 s. The new loop's
      // run was last confirmed at 5 s and it is never renewable (the store refuses its lease):
      // its budget ends at 24 s, so its registration must wake the watcher early.
      const work = yield* Effect.fork(Effect.never)
      const late = yield* Effect.fork(
        Heartbeat.keepAlive("", ownerOf(9), work, { heartbeatAtMs: 5_000 }).pipe(
          Effect.provideService(Heartbeat.Pulse, pulse),
          Effect.provideService(RunStore.RunStore, store)
        )
      )
      yield* settleUntil()
      for (let second = 21; second <= 23; second++) {
        yield* TestClock.adjust(1_000)
        yield* settleUntil(allStamped(ids, second * 1_000))
      }
      yield* TestClock.adjust(999)
      yield* settleUntil()
      expect(yield* isDone(work)).toBe(false)
      yield* TestClock.adjust(1)
      yield* settleUntil(isDone(late))
      expect(yield* Fiber.join(late)).toEqual({ _tag: "Lapsed", unconfirmedMs: 19_000 })
      for (const { work } of renewing) expect(yield* isDone(work)).toBe(false)
    })))

  it.effect("when the pulse closes, its loops watch their own budgets again: at its end each reconfirms alone", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = ["z-0", "z-1"]
      yield* insertOwned(ids, ownerOf)
      const scope = yield* Scope.make()
      const pulse = yield* Scope.extend(Heartbeat.makePulse, scope)
      const loops = yield* keepAll(ids, pulse, store)
      yield* TestClock.adjust(1_000)
      yield* settleUntil(allStamped(ids, 1_000))
      yield* Scope.close(scope, Exit.void)
      yield* TestClock.adjust(18_999)
      yield* settleUntil()
      for (const { work } of loops) expect(yield* isDone(work)).toBe(false)
      // Confirmed at 1 s, nothing renews since: the budget ends at 20 s, then a reconfirm (which
      // still holds the lease) extends it, as a loop beating alone would.
      yield* TestClock.adjust(1)
      yield* settleUntil(Effect.map(stamps(ids), (stored) => ids.every((id) => stored.get(id) === 20_000)))
      for (const { work } of loops) expect(yield* isDone(work)).toBe(false)
    })))

  it.effect("with failing writes every run still lapses at exactly 19,000 ms, each failure logged once per run", () => {
    const logs: Array<{ readonly message: string; readonly runId: unknown }> = []
    const logger = Logger.make(({ annotations, message }) => {
      logs.push({
        message: String(Array.isArray(message) ? message[0] : message),
        runId: HashMap.get(annotations, "runId").pipe(Option.getOrUndefined)
      })
    })
    return run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = ["f-0", "f-1", "f-2"]
      yield* insertOwned(ids, ownerOf)
      const broken: RunStore.Service = { ...store, heartbeatLeases: () => failing, reconfirm: () => failing }
      const pulse = yield* Heartbeat.makePulse
      const loops = yield* keepAll(ids, pulse, broken)
      yield* TestClock.adjust(18_999)
      yield* settleUntil()
      for (const { work } of loops) expect(yield* isDone(work)).toBe(false)
      yield* TestClock.adjust(1)
      yield* settleUntil()
      for (const { loop, work } of loops) {
        expect(yield* isDone(work)).toBe(true)
        expect(yield* Fiber.join(loop)).toEqual({ _tag: "Lapsed", unconfirmedMs: 19_000 })
      }
      const failed = logs.filter((l) => l.message === "run heartbeat write failed")
      expect(failed.map((l) => l.runId).sort()).toEqual(ids)
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger))))
  })

  it.effect("a renewal still hanging when a loop it carries lapses is abandoned and never stamps the lease", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = ["h-0"]
      yield* insertOwned(ids, ownerOf)
      // From 1 s on every renewal hangs until the gate opens (a database that stopped taking writes,
      // as another process holding the lock), then writes as usual: left running, it would commit.
      const gate = yield* Deferred.make<void>()
      let hanging = false
      const calls: Array<number> = []
      const stuck: RunStore.Service = {
        ...store,
        heartbeatLeases: (leases, nowMs) => {
          calls.push(nowMs)
          return hanging ? Effect.zipRight(Deferred.await(gate), store.heartbeatLeases(leases, nowMs)) : store.heartbeatLeases(leases, nowMs)
        },
        reconfirm: () => failing
      }
      const pulse = yield* Heartbeat.makePulse
      const loops = yield* keepAll(ids, pulse, stuck)
      yield* TestClock.adjust(1_000)
      yield* settleUntil(allStamped(ids, 1_000))
      hanging = true
      yield* TestClock.adjust(1_000)
      yield* settleUntil(Effect.sync(() => calls.length >= 2))
      // The hanging renewal carries the lease; the budget runs out 19 s after the last confirmed beat.
      yield* TestClock.adjust(19_000)
      yield* settleUntil(isDone(loops[0]!.work))
      expect(yield* Fiber.join(loops[0]!.loop)).toMatchObject({ _tag: "Lapsed" })
      yield* Deferred.succeed(gate, undefined)
      yield* settleUntil()
      yield* TestClock.adjust(5_000)
      yield* settleUntil()
      expect((yield* stamps(ids)).get("h-0")).toBe(1_000)
    })))

  it.effect("a beat that confirms after failing writes re-arms the budget of every run", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = ["c-0", "c-1"]
      yield* insertOwned(ids, ownerOf)
      let down = true
      const flaky: RunStore.Service = {
        ...store,
        heartbeatLeases: (leases, nowMs) => down ? failing : store.heartbeatLeases(leases, nowMs)
      }
      const pulse = yield* Heartbeat.makePulse
      const loops = yield* keepAll(ids, pulse, flaky)
      yield* TestClock.adjust(17_000)
      yield* settleUntil()
      down = false
      yield* TestClock.adjust(1_000)
      yield* settleUntil(allStamped(ids, 18_000))
      // Unconfirmed since 0, the budget ended at 19 s; the beat at 18 s and each one after it
      // moved it past 19 s after itself.
      for (let second = 19; second <= 36; second++) {
        yield* TestClock.adjust(1_000)
        yield* settleUntil(allStamped(ids, second * 1_000))
      }
      for (const { work } of loops) expect(yield* isDone(work)).toBe(false)
    })))

  it.effect("while every lease renews, no loop's budget runs out: the watcher wakes, finds each renewed and never reconfirms", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = Array.from({ length: 5 }, (_, i) => `w-${i}`)
      yield* insertOwned(ids, ownerOf)
      let reconfirms = 0
      const counting: RunStore.Service = {
        ...store,
        reconfirm: (runId, owner, nowMs) => Effect.zipRight(Effect.sync(() => reconfirms++), store.reconfirm(runId, owner, nowMs))
      }
      const pulse = yield* Heartbeat.makePulse
      const loops = yield* keepAll(ids, pulse, counting)
      // Past two budgets (19 s, 38 s): the watcher wakes at 19 s and 38 s and must see the
      // renewals it was not handed one by one.
      for (let second = 1; second <= 45; second++) {
        yield* TestClock.adjust(1_000)
        yield* settleUntil(allStamped(ids, second * 1_000))
      }
      expect(reconfirms).toBe(0)
      for (const { work } of loops) expect(yield* isDone(work)).toBe(false)
    })))
}
