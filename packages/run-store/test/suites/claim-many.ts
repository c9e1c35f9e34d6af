/**
 * `claimAndOwnMany`: many released runs claimed and owned at once, each a compare-and-swap on its
 * status and stored state, the first `limit` still matching in the order given; facts per run; bad
 * input refused whole.
 */
import * as Consensus from "@baton/journal/Consensus"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { sqlLog } from "../support/capture.js"
import { A, B, facts, type MakeStack } from "../support/stack.js"

const claimOf = (runId: string, expectedState = "{}", stateJson = `{"claimed":"${runId}"}`): RunStore.ReleasedClaim => ({
  runId,
  expectedStatus: "suspended",
  expectedState,
  stateJson
})

const updates = (statements: ReadonlyArray<string>) => statements.filter((text) => /\bUPDATE flows_runs\b/.test(text)).length

export const claimManySuite = (makeStack: MakeStack) => {
  const run = <X, E>(effect: Effect.Effect<X, E, any>) => Effect.provide(effect, makeStack())

  it.effect("claims every matching run in one update: owned, stamped, its new state installed, claimed and activated stated", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.createReleased([1, 2, 3].map((i) => ({ runId: `r${i}`, stateJson: "{}" })))
      const log = sqlLog()
      const outcomes = yield* log.within(store.claimAndOwnMany([claimOf("r3"), claimOf("r1")], A, 5_000))
      expect([...outcomes]).toEqual([["r3", { _tag: "Activated" }], ["r1", { _tag: "Activated" }]])
      expect(updates(log.statements)).toBe(1)
      for (const id of ["r1", "r3"]) {
        const row = yield* store.get(id)
        expect(row).toMatchObject({ status: "running", owner: A, heartbeatAtMs: 5_000, claim: null, stateJson: `{"claimed":"${id}"}` })
        expect(yield* facts(id)).toEqual(["claimed", "activated"])
      }
      expect((yield* store.get("r2")).status).toBe("suspended")
      expect(yield* facts("r2")).toEqual([])
      // Owned now: a second batch over the same runs misses them all and writes nothing.
      const again = yield* store.claimAndOwnMany([claimOf("r1", `{"claimed":"r1"}`)], B, 6_000)
      expect(again.get("r1")).toEqual({ _tag: "Missed" })
      expect((yield* store.get("r1")).owner).toEqual(A)
    })))

  it.effect("a run whose state or status moved on since it was read is missed; the limit takes the first still matching, in order", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      yield* store.createReleased([1, 2, 3, 4].map((i) => ({ runId: `r${i}`, stateJson: "{}" })))
      // Another writer changed r1's state and took r2 since the batch was read.
      yield* sql`UPDATE flows_runs SET state_json = '{"moved":true}' WHERE run_id = 'r1'`
      expect((yield* store.claimAndOwnMany([claimOf("r2")], B, 1_000)).get("r2")).toEqual({ _tag: "Activated" })
      const outcomes = yield* store.claimAndOwnMany(["r1", "r2", "r4", "r3"].map((id) => claimOf(id)), A, 2_000, 1)
      expect(Object.fromEntries([...outcomes].map(([id, o]) => [id, o._tag]))).toEqual({
        r1: "Missed",
        r2: "Missed",
        r4: "Activated",
        r3: "Missed"
      })
      expect((yield* store.get("r1")).stateJson).toBe(`{"moved":true}`)
      expect((yield* store.get("r2")).owner).toEqual(B)
      expect((yield* store.get("r3")).status).toBe("suspended")
      expect((yield* store.get("r4")).owner).toEqual(A)
    })))

  it.effect("bad input fails invalid_run naming the field, and nothing is claimed", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.createReleased([{ runId: "r1", stateJson: "{}" }])
      const refused = (claims: unknown, owner: unknown = A, nowMs: unknown = 0, limit?: unknown) =>
        Effect.flip(store.claimAndOwnMany(claims as never, owner as never, nowMs as never, limit as never))
      const cases: ReadonlyArray<readonly [Effect.Effect<RunStore.RunStoreError, unknown>, RegExp]> = [
        [refused("r1"), /claims/],
        [refused([claimOf("r1"), claimOf("r1")]), /claims\[1\]\.runId/],
        [refused([{ ...claimOf("r1"), expectedStatus: "running" }]), /claims\[0\]\.expectedStatus/],
        [refused([{ ...claimOf("r1"), stateJson: "{" }]), /claims\[0\]\.stateJson/],
        [refused([{ ...claimOf("r1"), expectedState: 7 }]), /claims\[0\]\.expectedState/],
        [refused([claimOf("r1")], { hostId: "", pid: 1, nonce: "n" }), /owner/],
        [refused([claimOf("r1")], A, -1), /nowMs/],
        [refused([claimOf("r1")], A, 0, 1.5), /limit/],
        [refused(Array.from({ length: RunStore.claimAndOwnManyMax + 1 }, (_, i) => claimOf(`x${i}`))), /claims/]
      ]
      for (const [effect, field] of cases) {
        const error = yield* effect
        expect(error.code).toBe("invalid_run")
        expect(error.message).toMatch(field)
      }
      expect((yield* store.get("r1")).status).toBe("suspended")
      expect((yield* store.claimAndOwnMany([], A, 0)).size).toBe(0)
    })))

  it.effect("over another strategy each run is claimed and transitioned on its own, with the same answers", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.createReleased([1, 2].map((i) => ({ runId: `r${i}`, stateJson: "{}" })))
      const outcomes = yield* store.claimAndOwnMany([claimOf("r1"), claimOf("r2")], A, 1_000, 1)
      expect(outcomes.get("r1")).toEqual({ _tag: "Activated" })
      expect(outcomes.get("r2")).toEqual({ _tag: "Missed" })
      expect(yield* store.get("r1")).toMatchObject({ status: "running", owner: A, stateJson: `{"claimed":"r1"}` })
      expect((yield* store.get("r2")).status).toBe("suspended")
    }).pipe(Effect.provide(makeStack(Consensus.layerLocal))))
}
