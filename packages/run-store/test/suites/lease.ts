/**
 * Checks 22 and 24–26: heartbeats, transitions, guards and journal atomicity.
 */
import * as Consensus from "@baton/journal/Consensus"
import * as Journal from "@baton/journal/Journal"
import * as RunStore from "@baton/run-store/RunStore"
import { expect, it } from "@effect/vitest"
import { Context, Effect, Either, Layer, TestClock } from "effect"
import { A, B, C, ev, facts, type MakeStack, ownedRun, pending, running } from "../support/stack.js"

export const leaseSuite = (makeStack: MakeStack) => {
  const run = <X, E>(effect: Effect.Effect<X, E, any>) => Effect.provide(effect, makeStack())
  const owned = (id: string, owner = A) => ownedRun(id, owner, '{"v":1}')

  it.effect("22: the stored stamp never moves backwards", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      expect(yield* store.heartbeat("r", A, 5000)).toEqual({ _tag: "Updated", heartbeatAtMs: 5000 })
      expect(yield* store.heartbeat("r", A, 3000)).toEqual({ _tag: "Updated", heartbeatAtMs: 5000 })
      expect((yield* store.get("r")).heartbeatAtMs).toBe(5000)
      expect(yield* store.reconfirm("r", A, 4000)).toEqual({ _tag: "Updated", heartbeatAtMs: 5000 })
      yield* store.transitionOwned("r", A, "suspended")
      expect(yield* store.heartbeat("r", A, 6000)).toEqual({ _tag: "FenceLost" })
      expect(yield* store.heartbeat("missing", A, 6000)).toEqual({ _tag: "NotFound" })
      expect(yield* store.reconfirm("missing", A, 6000)).toEqual({ _tag: "NotFound" })
    })))

  it.effect("24: running rewrites state only; suspended and terminal clear ownership", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      expect(yield* store.transitionOwned("r", A, "running", '{"v":2}')).toEqual({ _tag: "Transitioned" })
      let row = yield* store.get("r")
      expect([row.status, row.owner, row.stateJson]).toEqual(["running", A, '{"v":2}'])
      expect(yield* store.transitionOwned("r", A, "running")).toEqual({ _tag: "Transitioned" })
      expect((yield* store.get("r")).stateJson).toBe('{"v":2}')
      expect(yield* store.transitionOwned("r", B, "running")).toEqual({ _tag: "FenceLost" })
      expect(yield* store.transitionOwned("missing", A, "running")).toEqual({ _tag: "NotFound" })
      for (const bad of ["pending", "unknown"]) {
        const error = yield* Effect.flip(store.transitionOwned("r", A, bad as RunStore.RunStatus))
        expect(error.code).toBe("invalid_run")
      }
      expect((yield* store.get("r")).status).toBe("running")

      yield* TestClock.setTime(31_000)
      expect((yield* store.steal("r", yield* store.get("r"), B, 31_000, ev(A, B, 31_000)))._tag).toBe("Claimed")
      expect(yield* store.transitionOwned("r", A, "suspended", '{"v":3}')).toEqual({ _tag: "Transitioned" })
      row = yield* store.get("r")
      expect([row.status, row.owner, row.heartbeatAtMs, row.claim, row.finishedAtMs, row.stateJson]).toEqual([
        "suspended",
        null,
        null,
        null,
        null,
        '{"v":3}'
      ])
      expect(yield* facts("r")).toEqual(["claimed", "activated", "stolen", "released", "released"])
      expect(yield* store.claim("r", row, C, 31_000)).toEqual({ _tag: "Claimed", claimedAtMs: 31_000 })

      for (const [i, status] of (["completed", "failed", "cancelled"] as const).entries()) {
        yield* TestClock.setTime(40_000 + i)
        const id = `t-${status}`
        yield* store.create(id, "{}")
        yield* store.claimAndOwn(id, pending, A, 40_000 + i)
        expect(yield* store.transitionOwned(id, A, status, '{"done":true}')).toEqual({ _tag: "Transitioned" })
        const done = yield* store.get(id)
        expect([done.status, done.owner, done.heartbeatAtMs, done.claim, done.finishedAtMs, done.stateJson]).toEqual([
          status,
          null,
          null,
          null,
          40_000 + i,
          '{"done":true}'
        ])
      }
    })))

  it.effect("25: the cancellation guard is checked in the transition's transaction", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("a")
      yield* store.requestCancel("a", 1)
      expect(yield* store.transitionOwned("a", A, "completed", undefined, { cancelRequested: "absent" })).toEqual({
        _tag: "GuardFailed"
      })
      expect((yield* store.get("a")).status).toBe("running")
      expect(yield* store.transitionOwned("a", B, "completed", undefined, { cancelRequested: "present" })).toEqual({
        _tag: "FenceLost"
      })
      expect(yield* store.transitionOwned("a", A, "cancelled", undefined, { cancelRequested: "present" })).toEqual({
        _tag: "Transitioned"
      })
      yield* owned("b")
      expect(yield* store.transitionOwned("b", A, "completed", undefined, { cancelRequested: "present" })).toEqual({
        _tag: "GuardFailed"
      })
      expect(yield* store.transitionOwned("b", A, "running", undefined, {})).toEqual({ _tag: "Transitioned" })
      expect(yield* store.transitionOwned("b", A, "completed", undefined, { cancelRequested: "absent" })).toEqual({
        _tag: "Transitioned"
      })
    })))

  it.effect("26: a rolled-back journal transaction rolls back the transition and its lease change", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      const journal = yield* Journal.Journal
      const failed = yield* Effect.either(
        journal.transact(Effect.zipRight(store.transitionOwned("r", A, "suspended"), Effect.fail("boom" as const)))
      )
      expect(Either.isLeft(failed)).toBe(true)
      expect((yield* store.get("r")).status).toBe("running")
      expect(yield* facts("r")).toEqual(["claimed", "activated"])
      expect(yield* store.heartbeat("r", A, 1)).toEqual({ _tag: "Updated", heartbeatAtMs: 1 })
    })))

  it.effect("26: without a Journal in context the fence is kept and nothing is recorded", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      const withoutJournal = <X, E, R>(effect: Effect.Effect<X, E, R>) =>
        Effect.mapInputContext(effect, (context: Context.Context<R>) => Context.omit(Journal.Journal)(context) as any)
      expect(yield* withoutJournal(store.claimAndOwn("r", pending, A, 0))).toEqual({ _tag: "Activated" })
      expect(yield* withoutJournal(store.transitionOwned("r", A, "suspended"))).toEqual({ _tag: "Transitioned" })
      expect(yield* facts("r")).toEqual([])
      expect(yield* store.heartbeat("r", A, 1)).toEqual({ _tag: "FenceLost" })
    })))

  it.effect("26: a failing journal fails claimAndOwn and rolls back the grant", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      const error = yield* Effect.flip(
        Effect.provideService(store.claimAndOwn("r", pending, A, 0), Journal.Journal, Journal.makeNoop())
      )
      expect(error.code).toBe("persistence_failed")
      expect((yield* store.get("r")).status).toBe("pending")
      expect(yield* store.claimAndOwn("r", pending, B, 0)).toEqual({ _tag: "Activated" })
    })))

  it.effect("26: a strategy whose storage fails fails claim and transitionOwned with persistence_failed", () => {
    let broken = false
    const failing = <A>(operation: string, ok: Effect.Effect<A, Consensus.ConsensusError>) =>
      Effect.suspend(() => broken ? Effect.fail(Consensus.persistenceFailed(operation, "disk gone")) : ok)
    const strategy = Layer.effect(
      Consensus.Consensus,
      Effect.map(Consensus.makeLocal, (local) =>
        Consensus.make({
          ...local,
          claim: (runId, claimant, nowMs) => failing("claim", local.claim(runId, claimant, nowMs)),
          guard: (runId, owner) => failing("guard", local.guard(runId, owner))
        }))
    )
    return Effect.gen(function*() {
      const store = yield* owned("r")
      yield* store.create("s", "{}")
      broken = true
      expect((yield* Effect.flip(store.claim("s", pending, A, 0))).code).toBe("persistence_failed")
      expect((yield* Effect.flip(store.transitionOwned("r", A, "completed"))).code).toBe("persistence_failed")
      expect((yield* store.get("r")).status).toBe("running")
      expect((yield* store.get("s")).claim).toBe(null)
    }).pipe(Effect.provide(makeStack(strategy)))
  })

  it.effect("a stale owner's transition after a takeover answers FenceLost", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      yield* TestClock.setTime(30_001)
      expect(yield* store.claimAndOwn("r", running(A, 0), C, 30_001, ev(A, C, 30_001))).toEqual({ _tag: "Activated" })
      expect(yield* store.transitionOwned("r", A, "completed")).toEqual({ _tag: "FenceLost" })
      expect(yield* store.heartbeat("r", A, 30_002)).toEqual({ _tag: "FenceLost" })
      expect(yield* facts("r")).toEqual(["claimed", "activated", "stolen", "activated"])
    })))
}
