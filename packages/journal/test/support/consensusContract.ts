/**
 * The Consensus contract (journal.md checks 23–29), written once and run
 * against both strategies: `layerLocal` here, and the run store's row-backed
 * `SqlConsensus` on SQLite and on PostgreSQL in the run store's tests (whose
 * suites create the runs first).
 */
import { DurableWriter } from "@baton/database/DurableWriter"
import * as Consensus from "@baton/journal/Consensus"
import type { OwnerId } from "@baton/journal/OwnerId"
import type * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { A, B, C, S } from "./owners.js"

type Env = Consensus.Consensus | DurableWriter | SqlClient.SqlClient

const evidence = (
  expectedOwner: OwnerId,
  checkedAtMs: number,
  kind: Consensus.LivenessEvidence["kind"]
): Consensus.LivenessEvidence => ({ expectedOwner, checkedAtMs, kind })

export const consensusContract = (
  name: string,
  makeLayer: () => Layer.Layer<Env, unknown>,
  options: {
    readonly transactional: boolean
    readonly timeout?: number
    /** Runs before each test, e.g. to create the runs a row-backed strategy needs. */
    readonly prepare?: Effect.Effect<void, unknown, Env>
  }
) =>
  describe(`Consensus contract: ${name}`, () => {
    const test = (title: string, body: (c: Consensus.Service) => Effect.Effect<void, unknown, Env>) =>
      it.effect(
        title,
        () =>
          Effect.gen(function*() {
            if (options.prepare !== undefined) yield* options.prepare
            yield* body(yield* Consensus.Consensus)
          }).pipe(Effect.provide(makeLayer()), Effect.scoped) as Effect.Effect<void, unknown>,
        options.timeout
      )

    test("check 23: a claim is exclusive", (c) =>
      Effect.gen(function*() {
        expect(yield* c.claim("r", A, 0)).toEqual({ _tag: "Granted", grantedAtMs: 0 })
        expect(yield* c.claim("r", B, 0)).toEqual({ _tag: "Rejected", reason: "already_claimed" })
        expect(yield* c.activate("r", A, 0, 0)).toEqual({ _tag: "Activated" })
        expect(yield* c.claim("r", B, 1)).toEqual({ _tag: "Rejected", reason: "owner_held" })
      }))

    test("check 24: activation presents the exact generation once", (c) =>
      Effect.gen(function*() {
        yield* c.claim("r", A, 5)
        expect(yield* c.activate("r", A, 6, 6)).toEqual({ _tag: "Lost" })
        expect(yield* c.activate("r", B, 5, 5)).toEqual({ _tag: "Lost" })
        expect(yield* c.activate("r", A, 5, 5)).toEqual({ _tag: "Activated" })
        expect(yield* c.activate("r", A, 5, 5)).toEqual({ _tag: "Lost" })
      }))

    test("check 25: heartbeats are monotonic; reconfirm refuses once a steal claim exists", (c) =>
      Effect.gen(function*() {
        yield* c.claim("r", A, 0)
        yield* c.activate("r", A, 0, 0)
        expect(yield* c.heartbeat("r", A, 250)).toEqual({ _tag: "Renewed", heartbeatAtMs: 250 })
        expect(yield* c.heartbeat("r", A, 150)).toEqual({ _tag: "Renewed", heartbeatAtMs: 250 })
        expect(yield* c.heartbeat("r", B, 300)).toEqual({ _tag: "Lost" })
        const now = 250 + S + 1
        expect(yield* c.steal("r", B, now, evidence(A, now, "cross-host-unreachable-stale"))).toEqual({
          _tag: "Granted",
          grantedAtMs: now
        })
        expect(yield* c.heartbeat("r", A, now)).toEqual({ _tag: "Renewed", heartbeatAtMs: now })
        expect(yield* c.reconfirm("r", A, now)).toEqual({ _tag: "Lost" })
        expect(yield* c.heartbeat("r", B, now)).toEqual({ _tag: "Lost" })
      }))

    test("check 25: reconfirm renews an owner without a pending claim", (c) =>
      Effect.gen(function*() {
        yield* c.claim("r", A, 0)
        yield* c.activate("r", A, 0, 0)
        expect(yield* c.reconfirm("r", A, 40)).toEqual({ _tag: "Renewed", heartbeatAtMs: 40 })
      }))

    test("check 26: steal needs staleness and matching evidence", (c) =>
      Effect.gen(function*() {
        yield* c.claim("r", A, 0)
        yield* c.activate("r", A, 0, 0)
        expect(yield* c.steal("r", B, S, evidence(A, S, "cross-host-unreachable-stale"))).toEqual({
          _tag: "Rejected",
          reason: "owner_live"
        })
        const now = S + 1
        const invalid = { _tag: "Rejected", reason: "evidence_invalid" }
        expect(yield* c.steal("r", B, now, evidence(B, now, "cross-host-unreachable-stale"))).toEqual(invalid)
        expect(yield* c.steal("r", B, now, evidence(A, S, "cross-host-unreachable-stale"))).toEqual(invalid)
        expect(yield* c.steal("r", B, now, evidence(A, now, "same-host-pid-dead"))).toEqual(invalid)
        expect(yield* c.steal("r", C, now, evidence(A, now, "cross-host-unreachable-stale"))).toEqual(invalid)
        expect(yield* c.steal("r", B, now, evidence(A, now, "cross-host-unreachable-stale"))).toEqual({
          _tag: "Granted",
          grantedAtMs: now
        })
        expect(yield* c.steal("r", C, now, evidence(A, now, "same-host-pid-dead"))).toEqual({
          _tag: "Rejected",
          reason: "already_claimed"
        })
      }))

    test("check 26: the owner cannot steal its own stale run (evidence_invalid, nothing written)", (c) =>
      Effect.gen(function*() {
        yield* c.claim("r", A, 0)
        yield* c.activate("r", A, 0, 0)
        const now = S + 1
        const invalid = { _tag: "Rejected", reason: "evidence_invalid" }
        expect(yield* c.steal("r", A, now, evidence(A, now, "lease-expired"))).toEqual(invalid)
        expect(yield* c.steal("r", A, now, evidence(A, now, "same-host-pid-dead"))).toEqual(invalid)
        // Unchanged: A still owns the run (guard), no claim is pending (a claim meets the owner, not a claim).
        yield* c.guard("r", A)
        expect(yield* c.claim("r", B, now)).toEqual({ _tag: "Rejected", reason: "owner_held" })
        // Positive control: another claimant with the same evidence is granted.
        expect(yield* c.steal("r", B, now, evidence(A, now, "lease-expired"))).toEqual({
          _tag: "Granted",
          grantedAtMs: now
        })
        expect(yield* c.activate("r", B, now, now)).toEqual({ _tag: "Activated" })
        yield* c.guard("r", B)
      }))

    test("check 26: same-host-pid-dead works from the owner's host, lease-expired from any host", (c) =>
      Effect.gen(function*() {
        yield* c.claim("r1", A, 0)
        yield* c.activate("r1", A, 0, 0)
        yield* c.claim("r2", A, 0)
        yield* c.activate("r2", A, 0, 0)
        const now = S + 1
        expect(yield* c.steal("r1", C, now, evidence(A, now, "same-host-pid-dead"))).toEqual({
          _tag: "Granted",
          grantedAtMs: now
        })
        expect(yield* c.steal("r2", B, now, evidence(A, now, "lease-expired"))).toEqual({
          _tag: "Granted",
          grantedAtMs: now
        })
        expect(yield* c.steal("none", B, now, evidence(A, now, "lease-expired"))).toEqual({
          _tag: "Rejected",
          reason: "evidence_invalid"
        })
      }))

    test("check 26: a thief that activates becomes the owner the guard accepts", (c) =>
      Effect.gen(function*() {
        yield* c.claim("r", A, 0)
        yield* c.activate("r", A, 0, 0)
        const now = S + 1
        yield* c.steal("r", B, now, evidence(A, now, "cross-host-unreachable-stale"))
        yield* c.guard("r", A)
        expect(yield* c.activate("r", B, now, now)).toEqual({ _tag: "Activated" })
        yield* c.guard("r", B)
        const lost = yield* Effect.flip(c.guard("r", A))
        expect(lost.code).toBe("fence_lost")
      }))

    test("check 27: recover clears only an exact, stale claim with valid evidence", (c) =>
      Effect.gen(function*() {
        yield* c.claim("r", A, 0)
        expect(yield* c.recover("r", A, 0, B, S + 1, evidence(A, S, "cross-host-unreachable-stale"))).toEqual({
          _tag: "Rejected",
          reason: "evidence_invalid"
        })
        expect(yield* c.recover("r", C, 0, B, S + 1, evidence(C, S + 1, "cross-host-unreachable-stale"))).toEqual({
          _tag: "Rejected",
          reason: "claim_changed"
        })
        expect(yield* c.recover("r", A, 1, B, S + 1, evidence(A, S + 1, "cross-host-unreachable-stale"))).toEqual({
          _tag: "Rejected",
          reason: "claim_changed"
        })
        expect(yield* c.recover("r", A, 0, B, S, evidence(A, S, "cross-host-unreachable-stale"))).toEqual({
          _tag: "Rejected",
          reason: "claim_fresh"
        })
        expect(yield* c.recover("r", A, 0, B, S + 1, evidence(A, S + 1, "cross-host-unreachable-stale"))).toEqual({
          _tag: "Recovered"
        })
        expect(yield* c.claim("r", B, S + 1)).toEqual({ _tag: "Granted", grantedAtMs: S + 1 })
      }))

    test("check 28: release by a stranger changes nothing; by the claimant or owner it frees the run", (c) =>
      Effect.gen(function*() {
        yield* c.claim("r", A, 0)
        yield* c.release("r", B)
        expect(yield* c.claim("r", B, 1)).toEqual({ _tag: "Rejected", reason: "already_claimed" })
        yield* c.release("r", A)
        expect(yield* c.claim("r", B, 2)).toEqual({ _tag: "Granted", grantedAtMs: 2 })
        expect(yield* c.activate("r", B, 2, 2)).toEqual({ _tag: "Activated" })
        yield* c.release("r", A)
        yield* c.guard("r", B)
        yield* c.release("r", B)
        expect(yield* c.heartbeat("r", B, 3)).toEqual({ _tag: "Lost" })
        expect((yield* Effect.flip(c.guard("r", B))).code).toBe("fence_lost")
        yield* c.release("unknown-run", B)
        expect(yield* c.claim("r", A, 4)).toEqual({ _tag: "Granted", grantedAtMs: 4 })
      }))

    test(`check 29: a claim inside a failed write ${options.transactional ? "rolls back" : "stays (not transactional)"}`, (c) =>
      Effect.gen(function*() {
        const writer = yield* DurableWriter
        const failed = yield* writer.write(
          c.claim("r", A, 0).pipe(Effect.zipRight(Effect.fail("boom" as const))),
          { key: "r" }
        ).pipe(Effect.flip)
        expect(failed).toBe("boom")
        const after = yield* c.claim("r", B, 1)
        expect(after).toEqual(
          options.transactional ? { _tag: "Granted", grantedAtMs: 1 } : { _tag: "Rejected", reason: "already_claimed" }
        )
      }))

    test("malformed arguments fail invalid_input naming the field", (c) =>
      Effect.gen(function*() {
        const badOwner = yield* Effect.flip(c.claim("r", { hostId: "h", pid: -1, nonce: "n" }, 0))
        expect(badOwner.code).toBe("invalid_input")
        expect(badOwner.field).toBe("claimant.pid")
        const badNow = yield* Effect.flip(c.heartbeat("r", A, 1.5))
        expect(badNow.field).toBe("nowMs")
        const badRun = yield* Effect.flip(c.guard("", A))
        expect(badRun.field).toBe("runId")
        expect(yield* c.claim("r", A, 0)).toEqual({ _tag: "Granted", grantedAtMs: 0 })
      }))
  })
