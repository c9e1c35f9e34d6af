/**
 * Checks 10–14 and 16–21: claims, ownership and the journal, on any dialect.
 */
import * as Consensus from "@baton/journal/Consensus"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import * as Journal from "@baton/journal/Journal"
import { Chunk, Effect, Layer, Queue, TestClock } from "effect"
import { A, B, C, ev, factEntries, facts, type MakeStack, ownedRun, pending, running } from "../support/stack.js"

export const claimsSuite = (makeStack: MakeStack) => {
  const run = <X, E>(effect: Effect.Effect<X, E, any>) => Effect.provide(effect, makeStack())
  const owned = (id: string, owner = A) => ownedRun(id, owner)

  it.effect("10: two-phase lifecycle journals claimed, activated, released", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      expect(yield* store.claim("r", pending, A, 0)).toEqual({ _tag: "Claimed", claimedAtMs: 0 })
      expect(yield* store.activate("r", A, 0, pending)).toEqual({ _tag: "Activated" })
      const row = yield* store.get("r")
      expect([row.status, row.owner, row.heartbeatAtMs, row.claim]).toEqual(["running", A, 0, null])
      expect(yield* store.heartbeat("r", A, 5)).toEqual({ _tag: "Updated", heartbeatAtMs: 5 })
      const entries = yield* factEntries("r")
      expect(entries.map((e) => e.eventType)).toEqual(["flows.consensus.claimed", "flows.consensus.activated"])
      for (const e of entries) {
        expect(e.payload).toEqual({ runId: "r", owner: A, grantedAtMs: 0 })
        expect(e.sourceId).toBe("flows.run-store")
        expect(e.meta).toEqual({ runId: "r" })
      }
      expect(yield* store.transitionOwned("r", A, "suspended")).toEqual({ _tag: "Transitioned" })
      const after = yield* factEntries("r")
      expect(after.length).toBe(3)
      expect(after[2]!.eventType).toBe("flows.consensus.released")
      expect(after[2]!.payload).toEqual({ runId: "r", owner: A, grantedAtMs: null })
      expect(yield* store.heartbeat("r", A, 6)).toEqual({ _tag: "FenceLost" })
    })))

  it.effect("11: concurrent claims and claimAndOwns have exactly one winner", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      const claims = yield* Effect.all([store.claim("r", pending, A, 0), store.claim("r", pending, B, 0)], {
        concurrency: 2
      })
      expect(claims.filter((c) => c._tag === "Claimed").length).toBe(1)
      const loser = claims.find((c) => c._tag !== "Claimed")!
      expect(["AlreadyClaimed", "SnapshotChanged"]).toContain(loser._tag)
      yield* store.create("s", "{}")
      const owns = yield* Effect.all([store.claimAndOwn("s", pending, A, 0), store.claimAndOwn("s", pending, B, 0)], {
        concurrency: 2
      })
      expect(owns.filter((c) => c._tag === "Activated").length).toBe(1)
      const other = owns.find((c) => c._tag !== "Activated")!
      expect(["HeartbeatFresh", "SnapshotChanged"]).toContain(other._tag)
      const winner = owns[0]!._tag === "Activated" ? A : B
      expect((yield* store.get("s")).owner).toEqual(winner)
    })))

  it.effect("12: claim losses are classified from the row", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      expect(yield* store.claim("missing", pending, A, 0)).toEqual({ _tag: "NotFound" })
      yield* store.create("claimed", "{}")
      yield* store.claim("claimed", pending, A, 0)
      expect(yield* store.claim("claimed", pending, B, 0)).toEqual({ _tag: "AlreadyClaimed" })
      yield* owned("fresh")
      expect(yield* store.claim("fresh", pending, B, 0)).toEqual({ _tag: "HeartbeatFresh" })
      yield* TestClock.setTime(31_000)
      expect(yield* store.claim("fresh", pending, B, 31_000)).toEqual({ _tag: "SnapshotChanged" })
      expect((yield* store.get("fresh")).claim).toBeNull()
      yield* store.transitionOwned("fresh", A, "completed")
      expect(yield* store.claim("fresh", pending, B, 31_000)).toEqual({ _tag: "SnapshotChanged" })
    })))

  it.effect("13: claimAndOwn over a live or stale foreign owner needs matching evidence", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      const old = running(A, 0)
      expect(yield* store.claimAndOwn("r", old, B, 0)).toEqual({ _tag: "HeartbeatFresh" })
      yield* TestClock.setTime(31_000)
      expect(yield* store.claimAndOwn("r", old, B, 31_000)).toEqual({ _tag: "EvidenceRequired" })
      expect(yield* store.claimAndOwn("r", old, B, 31_000)).toEqual({ _tag: "EvidenceRequired" })
      expect((yield* store.get("r")).owner).toEqual(A)
      expect(yield* store.claimAndOwn("r", old, B, 31_000, ev(A, B, 30_999))).toEqual({ _tag: "EvidenceRequired" })
      expect(
        yield* store.claimAndOwn("r", old, B, 31_000, { ...ev(A, B, 31_000), kind: "cross-host-unreachable-stale" })
      ).toEqual({ _tag: "EvidenceRequired" })
      expect(
        yield* store.claimAndOwn("r", old, C, 31_000, { ...ev(A, C, 31_000), kind: "same-host-pid-dead" })
      ).toEqual({ _tag: "EvidenceRequired" })
      expect(yield* store.transitionOwned("r", A, "suspended")).toEqual({ _tag: "Transitioned" })
      expect(yield* store.claimAndOwn("r", old, B, 31_000)).toEqual({ _tag: "SnapshotChanged" })
      expect(yield* store.claimAndOwn("r", yield* store.get("r"), B, 31_000)).toEqual({ _tag: "Activated" })
      yield* owned("done")
      yield* store.transitionOwned("done", A, "completed")
      expect(yield* store.claimAndOwn("done", running(A, 0), B, 31_000)).toEqual({ _tag: "SnapshotChanged" })
    })))

  for (const [now, expected] of [[29_999, "fresh"], [30_000, "fresh"], [30_001, "stale"]] as const) {
    it.effect(`14: strict cutoff at ${now}`, () =>
      run(Effect.gen(function*() {
        const store = yield* owned("own")
        yield* owned("steal")
        yield* store.create("claim", "{}")
        yield* store.claim("claim", pending, A, 0)
        yield* TestClock.setTime(now)
        const stale = expected === "stale"
        expect(yield* store.claimAndOwn("own", running(A, 0), B, now, ev(A, B, now))).toEqual({
          _tag: stale ? "Activated" : "HeartbeatFresh"
        })
        expect(yield* store.recoverClaim("claim", A, 0, B, now, ev(A, B, now))).toEqual({
          _tag: stale ? "Recovered" : "ClaimFresh"
        })
        expect(yield* store.steal("steal", running(A, 0), B, now, ev(A, B, now))).toEqual(
          stale ? { _tag: "Claimed", claimedAtMs: now } : { _tag: "HeartbeatFresh" }
        )
      })))
  }

  it.effect("16: re-owning one's own stale run releases and claims a fresh generation", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      yield* TestClock.setTime(30_001)
      expect(yield* store.claimAndOwn("r", running(A, 0), A, 30_001)).toEqual({ _tag: "Activated" })
      expect((yield* store.get("r")).heartbeatAtMs).toBe(30_001)
      expect(yield* facts("r")).toEqual(["claimed", "activated", "released", "claimed", "activated"])
      expect(yield* store.heartbeat("r", A, 30_002)).toEqual({ _tag: "Updated", heartbeatAtMs: 30_002 })
    })))

  it.effect("17: steal then activate hands the run over", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      yield* TestClock.setTime(31_000)
      const old = running(A, 0)
      const stolen = yield* store.steal("r", old, C, 31_000, ev(A, C, 31_000))
      expect(stolen).toEqual({ _tag: "Claimed", claimedAtMs: 31_000 })
      expect(yield* facts("r")).toEqual(["claimed", "activated", "stolen"])
      expect(yield* store.activate("r", C, 31_000, old)).toEqual({ _tag: "Activated" })
      expect(yield* facts("r")).toEqual(["claimed", "activated", "stolen", "activated"])
      expect(yield* store.heartbeat("r", A, 31_001)).toEqual({ _tag: "FenceLost" })
      expect(yield* store.heartbeat("r", C, 31_001)).toEqual({ _tag: "Updated", heartbeatAtMs: 31_001 })

      yield* TestClock.setTime(0)
      const s2 = yield* owned("r2")
      yield* TestClock.setTime(31_000)
      const expired = { expectedOwner: A, checkedAtMs: 31_000, kind: "lease-expired" } as const
      expect(yield* s2.steal("r2", old, C, 31_000, { ...expired, expectedOwner: C })).toEqual({
        _tag: "LivenessUnconfirmed"
      })
      expect(yield* s2.steal("r2", old, C, 31_000, expired)).toEqual({ _tag: "Claimed", claimedAtMs: 31_000 })
      expect(yield* s2.activate("r2", C, 31_000, old)).toEqual({ _tag: "Activated" })
      yield* TestClock.setTime(0)
      yield* owned("r3")
      yield* TestClock.setTime(20_000)
      expect(yield* s2.steal("r3", old, C, 20_000, { ...expired, checkedAtMs: 20_000 })).toEqual({
        _tag: "HeartbeatFresh"
      })
    })))

  it.effect("18: an old owner's heartbeat beats the thief's activation", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      yield* TestClock.setTime(31_000)
      const old = running(A, 0)
      expect(yield* store.steal("r", old, B, 31_000, ev(A, B, 31_000))).toEqual({ _tag: "Claimed", claimedAtMs: 31_000 })
      expect(yield* store.heartbeat("r", A, 31_000)).toEqual({ _tag: "Updated", heartbeatAtMs: 31_000 })
      expect(yield* store.reconfirm("r", A, 31_000)).toEqual({ _tag: "FenceLost" })
      expect(yield* store.activate("r", B, 31_000, old)).toEqual({ _tag: "SnapshotChanged" })
      const row = yield* store.get("r")
      expect([row.owner, row.heartbeatAtMs, row.claim, row.claimedAtMs]).toEqual([A, 31_000, null, null])
      const entries = yield* factEntries("r")
      expect(entries.at(-1)!.eventType).toBe("flows.consensus.released")
      expect(entries.at(-1)!.payload).toEqual({ runId: "r", owner: B, grantedAtMs: 31_000 })
      // The strategy holds no claim for B: reconfirm (refused while any claim is pending) renews again.
      expect(yield* store.reconfirm("r", A, 31_001)).toEqual({ _tag: "Updated", heartbeatAtMs: 31_001 })
    })))

  it.effect("19: abandoning a steal claim keeps the old owner", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      yield* TestClock.setTime(31_000)
      yield* store.steal("r", running(A, 0), B, 31_000, ev(A, B, 31_000))
      expect(yield* store.abandonClaim("r", C, 31_000)).toEqual({ _tag: "ClaimLost" })
      expect(yield* store.abandonClaim("r", B, 30_999)).toEqual({ _tag: "ClaimLost" })
      expect(yield* store.abandonClaim("r", B, 31_000)).toEqual({ _tag: "Abandoned" })
      const row = yield* store.get("r")
      expect([row.owner, row.heartbeatAtMs, row.claim]).toEqual([A, 0, null])
      expect(yield* facts("r")).toEqual(["claimed", "activated", "stolen", "released"])
    })))

  it.effect("20: recovering a stale claim, and a reused identity", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      yield* store.claim("r", pending, A, 0)
      expect(yield* store.recoverClaim("r", A, 0, B, 0, ev(A, B, 0))).toEqual({ _tag: "ClaimFresh" })
      yield* TestClock.setTime(31_000)
      expect(yield* store.claim("r", pending, B, 31_000)).toEqual({ _tag: "AlreadyClaimed" })
      expect(yield* store.recoverClaim("r", A, 0, B, 31_000, ev(C, B, 31_000))).toEqual({
        _tag: "LivenessUnconfirmed"
      })
      expect(yield* store.recoverClaim("r", A, 0, B, 31_000, ev(A, B, 31_000))).toEqual({ _tag: "Recovered" })
      expect((yield* facts("r")).at(-1)).toBe("expired")
      expect(yield* store.recoverClaim("r", A, 0, B, 31_000, ev(A, B, 31_000))).toEqual({ _tag: "ClaimChanged" })
      expect(yield* store.recoverClaim("nope", A, 0, B, 31_000, ev(A, B, 31_000))).toEqual({ _tag: "NotFound" })
      expect(yield* store.claim("r", pending, A, 31_000)).toEqual({ _tag: "Claimed", claimedAtMs: 31_000 })
      expect(yield* store.activate("r", A, 0, pending)).toEqual({ _tag: "ClaimLost" })
      expect(yield* store.abandonClaim("r", A, 0)).toEqual({ _tag: "ClaimLost" })
      expect((yield* store.get("r")).claimedAtMs).toBe(31_000)
      expect(yield* store.activate("r", A, 31_000, pending)).toEqual({ _tag: "Activated" })
    })))

  it.effect("21: the strategy is authoritative (layerLocal)", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const consensus = yield* Consensus.Consensus
      const sql = yield* SqlClient.SqlClient
      yield* store.create("behind", "{}")
      yield* consensus.claim("behind", C, 0)
      expect(yield* store.claim("behind", pending, A, 0)).toEqual({ _tag: "SnapshotChanged" })
      expect(yield* store.claimAndOwn("behind", pending, A, 0)).toEqual({ _tag: "SnapshotChanged" })
      expect(yield* facts("behind")).toEqual([])

      yield* sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, owner_host_id, owner_pid, owner_nonce,
        heartbeat_at_ms, state_json) VALUES (900, 'raw', 'running', 0, 'host-a', 101, 'a', 0, '{}')`
      expect(yield* store.transitionOwned("raw", A, "completed")).toEqual({ _tag: "FenceLost" })
      expect((yield* store.get("raw")).status).toBe("running")

      yield* store.create("mirror", "{}")
      yield* store.claimAndOwn("mirror", pending, A, 0)
      yield* sql`UPDATE flows_runs SET status = 'suspended', owner_host_id = NULL, owner_pid = NULL,
        owner_nonce = NULL, heartbeat_at_ms = NULL WHERE run_id = 'mirror'`
      expect(yield* store.heartbeat("mirror", A, 1)).toEqual({ _tag: "FenceLost" })
      yield* sql`DELETE FROM flows_runs WHERE run_id = 'mirror'`
      expect(yield* store.heartbeat("mirror", A, 2)).toEqual({ _tag: "NotFound" })
    }).pipe(Effect.provide(makeStack(Consensus.layerLocal))))

  it.effect("21: a strategy whose activate answers Lost leaves the lease free", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const consensus = yield* Consensus.Consensus
      yield* store.create("lost", "{}")
      expect(yield* store.claimAndOwn("lost", pending, A, 0)).toEqual({ _tag: "SnapshotChanged" })
      expect((yield* store.get("lost")).status).toBe("pending")
      expect((yield* consensus.claim("lost", B, 0))._tag).toBe("Granted")
    }).pipe(Effect.provide(makeStack(Layer.effect(
      Consensus.Consensus,
      Effect.map(Consensus.makeLocal, (local) => ({
        ...local,
        activate: () => Effect.succeed({ _tag: "Lost" } as const)
      }))
    )))))

  it.effect("a move's facts reach journal subscribers once it commits; a lost move states none", () =>
    run(Effect.scoped(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const journal = yield* Journal.Journal
      const changes = yield* journal.changes
      yield* store.create("r", "{}")
      expect(yield* store.claimAndOwn("r", pending, A, 0)).toEqual({ _tag: "Activated" })
      expect(yield* store.claimAndOwn("r", pending, B, 0)).toEqual({ _tag: "HeartbeatFresh" })
      expect(yield* store.transitionOwned("r", A, "completed")).toEqual({ _tag: "Transitioned" })
      const published = Chunk.toReadonlyArray(yield* Queue.takeAll(changes))
      expect(published.map((e) => [e.eventType, e.seq, e.sourceSeq])).toEqual([
        ["flows.consensus.claimed", 0, 0],
        ["flows.consensus.activated", 1, 1],
        ["flows.consensus.released", 2, 2]
      ])
      const stored = yield* factEntries("r")
      expect(stored.map((e) => [e.eventId, e.payload])).toEqual(published.map((e) => [e.eventId, e.payload]))
    }))))

  it.effect("moves racing on one run keep its fact stream dense: every seq and source_seq once, in order", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      const owners = [A, B, C]
      let wins = 0
      // Each round every owner races to own the run; the winner lets it go again. Under PostgreSQL the
      // racers hold different connections, so a move waits on the row lock another move holds.
      for (let round = 0; round < 8; round++) {
        const outcomes = yield* Effect.all(owners.map((o) => store.claimAndOwn("r", (round === 0 ? pending : { status: "suspended", owner: null, heartbeatAtMs: null }), o, round)), {
          concurrency: "unbounded"
        })
        const winner = outcomes.findIndex((o) => o._tag === "Activated")
        expect(outcomes.filter((o) => o._tag === "Activated").length).toBe(1)
        wins++
        expect(yield* store.transitionOwned("r", owners[winner]!, "suspended")).toEqual({ _tag: "Transitioned" })
      }
      const entries = yield* factEntries("r")
      expect(entries.length).toBe(wins * 3)
      expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i))
      expect(entries.map((e) => e.sourceSeq)).toEqual(entries.map((_, i) => i))
    })))
}
