import * as TestDatabase from "@baton/database/TestDatabase"
import * as Consensus from "@baton/journal/Consensus"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { consensusContract } from "./support/consensusContract.js"
import { A, B } from "./support/owners.js"

// The SQL strategy over the run row runs the same contract in the run store's tests.
consensusContract("layerLocal", () => Layer.merge(Consensus.layerLocal, TestDatabase.layer), { transactional: false })

describe("Consensus helpers", () => {
  it("matchesEvidence requires the named owner, the exact probe time and the host relation", () => {
    const ev = { expectedOwner: A, checkedAtMs: 10, kind: "cross-host-unreachable-stale" } as const
    expect(Consensus.matchesEvidence(A, B, 10, ev)).toBe(true)
    expect(Consensus.matchesEvidence(A, B, 11, ev)).toBe(false)
    expect(Consensus.matchesEvidence(B, B, 10, ev)).toBe(false)
    expect(Consensus.matchesEvidence(A, A, 10, ev)).toBe(false)
    expect(Consensus.matchesEvidence(A, A, 10, { ...ev, kind: "same-host-pid-dead" })).toBe(true)
    expect(Consensus.matchesEvidence(A, B, 10, { ...ev, kind: "lease-expired" })).toBe(true)
  })

  it("sameOwner compares all three fields", () => {
    expect(Consensus.sameOwner(A, { ...A })).toBe(true)
    expect(Consensus.sameOwner(A, { ...A, nonce: "other" })).toBe(false)
    expect(Consensus.sameOwner(A, { ...A, pid: 1 })).toBe(false)
  })

  it("the lease constants hold their documented values", () => {
    expect([
      Duration.toMillis(Consensus.heartbeatInterval),
      Duration.toMillis(Consensus.heartbeatStaleAfter),
      Duration.toMillis(Consensus.heartbeatSkewAllowance),
      Duration.toMillis(Consensus.heartbeatWriteTolerance)
    ]).toEqual([1_000, 30_000, 10_000, 19_000])
  })

  it.effect("makeNoop grants nothing and fences everything", () =>
    Effect.gen(function*() {
      const noop = Consensus.makeNoop()
      expect(yield* noop.claim("r", A, 0)).toEqual({ _tag: "Rejected", reason: "unavailable" })
      expect(yield* noop.heartbeat("r", A, 0)).toEqual({ _tag: "Lost" })
      expect((yield* Effect.flip(noop.guard("r", A))).code).toBe("fence_lost")
    }))
})
