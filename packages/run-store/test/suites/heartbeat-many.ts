/**
 * Batched heartbeats: `heartbeatMany` and `heartbeatLeases` outcomes, chunking, the losing
 * path's one read, and admission, on any dialect.
 */
import * as RunStore from "@baton/run-store/RunStore"
import { expect, it } from "@effect/vitest"
import { Effect, Equal } from "effect"
import { insertOwned, stamps } from "../support/bulk.js"
import { heartbeatUpdates, sqlLog } from "../support/capture.js"
import { A, B, C, type MakeStack, ownedRun } from "../support/stack.js"

/** A reading no reference clock admits (2096), on SQLite's TestClock and PostgreSQL's server clock. */
const farAhead = 4_000_000_000_000

const updated = (heartbeatAtMs: number) => ({ _tag: "Updated", heartbeatAtMs }) as const

export const heartbeatManySuite = (makeStack: MakeStack) => {
  const run = <X, E>(effect: Effect.Effect<X, E, any>) => Effect.provide(effect, makeStack())

  it.effect("heartbeatMany renews every listed run of the owner and answers each with its stored stamp", () =>
    run(Effect.gen(function*() {
      const store = yield* ownedRun("r1")
      yield* ownedRun("r2")
      const first = yield* store.heartbeatMany(A, ["r1", "r2"], 5_000)
      expect([...first]).toEqual([["r1", updated(5_000)], ["r2", updated(5_000)]])
      // A lower reading never moves a stamp back; the answer carries the stored one.
      expect([...(yield* store.heartbeatMany(A, ["r2"], 3_000))]).toEqual([["r2", updated(5_000)]])
      expect((yield* store.get("r2")).heartbeatAtMs).toBe(5_000)
    })))

  it.effect("a foreign owner's run and a terminal run answer FenceLost, a missing one NotFound, in the same call", () =>
    run(Effect.gen(function*() {
      const store = yield* ownedRun("mine")
      yield* ownedRun("theirs", B)
      yield* ownedRun("done")
      yield* store.transitionOwned("done", A, "completed")
      const answers = yield* store.heartbeatMany(A, ["mine", "theirs", "done", "missing"], 2_000)
      expect(Object.fromEntries(answers)).toEqual({
        mine: updated(2_000),
        theirs: { _tag: "FenceLost" },
        done: { _tag: "FenceLost" },
        missing: { _tag: "NotFound" }
      })
      expect((yield* store.get("theirs")).heartbeatAtMs).toBe(0)
      expect((yield* store.get("done")).heartbeatAtMs).toBeNull()
    })))

  it.effect("a shared batched answer is a frozen HeartbeatOutcome that Equal.equals compares by value", () =>
    run(Effect.gen(function*() {
      const store = yield* ownedRun("a")
      yield* ownedRun("b")
      yield* ownedRun("theirs", B)
      const won = yield* store.heartbeatLeases([{ runId: "a", owner: A }, { runId: "b", owner: A }], 1_000)
      expect(won[0]).toBe(won[1])
      expect(Object.isFrozen(won[0])).toBe(true)
      expect(Equal.equals(won[0], RunStore.HeartbeatOutcome.Updated({ heartbeatAtMs: 1_000 }))).toBe(true)
      const lost = yield* store.heartbeatLeases([{ runId: "theirs", owner: A }, { runId: "gone", owner: A }], 2_000)
      expect(lost.map(Object.isFrozen)).toEqual([true, true])
      expect(Equal.equals(lost[0], RunStore.HeartbeatOutcome.FenceLost())).toBe(true)
      expect(Equal.equals(lost[1], RunStore.HeartbeatOutcome.NotFound())).toBe(true)
    })))

  it.effect("a batch that renews every run is one statement; only a losing batch reads again, once", () =>
    run(Effect.gen(function*() {
      const store = yield* ownedRun("a")
      yield* ownedRun("b")
      const won = sqlLog()
      yield* won.within(store.heartbeatMany(A, ["a", "b"], 1_000))
      expect(won.statements.length).toBe(1)
      expect(heartbeatUpdates(won.statements)).toBe(1)
      const lost = sqlLog()
      yield* lost.within(store.heartbeatMany(A, ["a", "b", "gone-1", "gone-2"], 2_000))
      expect(lost.statements.length).toBe(2)
      expect(lost.statements[1]).toMatch(/^\s*SELECT/)
    })))

  it.effect("more than 1,000 runs are renewed in chunks of 1,000, one statement each, and all are renewed", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const ids = Array.from({ length: 2_205 }, (_, i) => `bulk-${i}`)
      yield* insertOwned(ids, () => A)
      const log = sqlLog()
      const answers = yield* log.within(store.heartbeatMany(A, ids, 7_000))
      expect(RunStore.heartbeatChunkSize).toBe(1_000)
      expect(heartbeatUpdates(log.statements)).toBe(3)
      expect(log.statements.length).toBe(3)
      expect(answers.size).toBe(ids.length)
      expect([...answers.values()].every((a) => a._tag === "Updated" && a.heartbeatAtMs === 7_000)).toBe(true)
      const stored = yield* stamps(ids)
      expect([...stored.values()].filter((stamp) => stamp === 7_000).length).toBe(ids.length)
    })))

  it.effect("duplicate ids are renewed once and answered once; an empty list sends nothing", () =>
    run(Effect.gen(function*() {
      const store = yield* ownedRun("r")
      const log = sqlLog()
      const answers = yield* log.within(store.heartbeatMany(A, ["r", "r", "r"], 4_000))
      expect([...answers]).toEqual([["r", updated(4_000)]])
      expect(log.statements.length).toBe(1)
      const none = sqlLog()
      expect((yield* none.within(store.heartbeatMany(A, [], 5_000))).size).toBe(0)
      expect(yield* none.within(store.heartbeatLeases([], 5_000))).toEqual([])
      expect(none.statements).toEqual([])
    })))

  it.effect("bad input fails invalid_run naming the field and the rule, and writes nothing", () =>
    run(Effect.gen(function*() {
      const store = yield* ownedRun("r")
      const refusal = (effect: Effect.Effect<unknown, RunStore.RunStoreError>) =>
        Effect.map(Effect.flip(effect), (error) => [error.code, (error.cause as { field: string }).field, error.message])
      const cases: ReadonlyArray<readonly [Effect.Effect<unknown, RunStore.RunStoreError>, string, RegExp]> = [
        [store.heartbeatMany(A, "r" as never, 1_000), "runIds", /runIds must be an array/],
        [store.heartbeatMany(A, ["r", ""], 1_000), "runIds[1]", /runIds\[1\] must be 1\.\.1024 characters long/],
        [store.heartbeatMany(A, ["r", 7 as never], 1_000), "runIds[1]", /runIds\[1\] must be a string/],
        [store.heartbeatMany({ ...A, pid: -1 }, ["r"], 1_000), "owner.pid", /owner\.pid must be a non-negative safe integer/],
        [store.heartbeatMany(A, ["r"], 1.5), "nowMs", /nowMs must be a non-negative safe integer/],
        [store.heartbeatMany(A, ["r"], farAhead), "nowMs", /nowMs leads the .* clock by more than 10000 ms/],
        [store.heartbeatLeases([{ runId: "r", owner: { ...A, nonce: "" } }], 1_000), "leases[0].owner.nonce", /must be 1\.\.1024/],
        [store.heartbeatLeases([{ runId: "r" } as never], 1_000), "leases[0].owner", /leases\[0\]\.owner must be a plain record/],
        [store.heartbeatLeases([{ runId: "r", owner: A, extra: 1 } as never], 1_000), "leases[0]", /unexpected key/],
        [store.heartbeatLeases([{ runId: "r", owner: A }], farAhead), "nowMs", /nowMs leads/]
      ]
      for (const [effect, field, message] of cases) {
        const [code, named, text] = yield* refusal(effect)
        expect([code, named]).toEqual(["invalid_run", field])
        expect(text).toMatch(message)
      }
      expect((yield* store.get("r")).heartbeatAtMs).toBe(0)
    })))

  it.effect("heartbeatLeases renews runs of different owners in one statement and answers lease by lease", () =>
    run(Effect.gen(function*() {
      const store = yield* ownedRun("a")
      yield* ownedRun("b", B)
      yield* ownedRun("c", C)
      const log = sqlLog()
      const answers = yield* log.within(store.heartbeatLeases([
        { runId: "a", owner: A },
        { runId: "b", owner: B },
        { runId: "c", owner: A },
        { runId: "missing", owner: C },
        { runId: "a", owner: A }
      ], 3_000))
      expect(answers).toEqual([updated(3_000), updated(3_000), { _tag: "FenceLost" }, { _tag: "NotFound" }, updated(3_000)])
      expect(heartbeatUpdates(log.statements)).toBe(1)
      expect(log.statements.length).toBe(2)
      expect((yield* store.get("c")).heartbeatAtMs).toBe(0)
    })))

  it.effect("heartbeatLeases of one process: a run listed for two claims renews for the holder only, odd ids included", () =>
    run(Effect.gen(function*() {
      const odd = "q\"uo\\te {\u00e9}"
      const store = yield* ownedRun("a")
      yield* ownedRun(odd)
      yield* ownedRun("__proto__")
      const other = { ...A, nonce: "a-later" }
      const log = sqlLog()
      // Distinct runs of one process travel as one object from run id to nonce.
      const byRun = yield* log.within(store.heartbeatLeases([
        { runId: odd, owner: A },
        { runId: "__proto__", owner: A },
        { runId: "a", owner: other }
      ], 2_000))
      expect(byRun).toEqual([updated(2_000), updated(2_000), { _tag: "FenceLost" }])
      // The same run for two claims cannot be one object's key: it travels as pairs.
      const pairs = yield* log.within(store.heartbeatLeases([
        { runId: "a", owner: other },
        { runId: "a", owner: A },
        { runId: odd, owner: A }
      ], 3_000))
      expect(pairs).toEqual([{ _tag: "FenceLost" }, updated(3_000), updated(3_000)])
      expect(heartbeatUpdates(log.statements)).toBe(2)
      expect([(yield* store.get("a")).heartbeatAtMs, (yield* store.get(odd)).heartbeatAtMs]).toEqual([3_000, 3_000])
      expect((yield* store.get("__proto__")).heartbeatAtMs).toBe(2_000)
    })))
}
