/**
 * §4.4: the lease constants are the journal's own values, and their order.
 */
import * as Consensus from "@baton/journal/Consensus"
import * as Heartbeat from "@baton/run-store/Heartbeat"
import * as Ownership from "@baton/run-store/Ownership"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { A, B, C } from "./support/stack.js"

describe("lease constants and ownership helpers", () => {
  it("re-exports the journal's four constants", () => {
    expect(Duration.toMillis(Heartbeat.heartbeatInterval)).toBe(1_000)
    expect(Duration.toMillis(Heartbeat.heartbeatStaleAfter)).toBe(30_000)
    expect(Duration.toMillis(Heartbeat.heartbeatSkewAllowance)).toBe(10_000)
    expect(Duration.toMillis(Heartbeat.heartbeatWriteTolerance)).toBe(19_000)
    expect(Heartbeat.heartbeatInterval).toBe(Consensus.heartbeatInterval)
    expect(Heartbeat.heartbeatStaleAfter).toBe(Consensus.heartbeatStaleAfter)
    expect(Heartbeat.heartbeatSkewAllowance).toBe(Consensus.heartbeatSkewAllowance)
    expect(Heartbeat.heartbeatWriteTolerance).toBe(Consensus.heartbeatWriteTolerance)
    expect(Ownership.heartbeatStaleAfter).toBe(Consensus.heartbeatStaleAfter)
    const ms = Duration.toMillis
    expect(ms(Heartbeat.heartbeatInterval) < ms(Heartbeat.heartbeatSkewAllowance)).toBe(true)
    expect(ms(Heartbeat.heartbeatSkewAllowance) < ms(Heartbeat.heartbeatStaleAfter)).toBe(true)
    expect(ms(Heartbeat.heartbeatWriteTolerance)).toBe(
      ms(Heartbeat.heartbeatStaleAfter) - ms(Heartbeat.heartbeatSkewAllowance) - ms(Heartbeat.heartbeatInterval)
    )
  })

  it.effect("leaseLiveness uses the strict cutoff; probes build evidence", () =>
    Effect.gen(function*() {
      const check = Ownership.leaseLiveness()
      expect(yield* check(A, { claimant: B, heartbeatAtMs: 0, nowMs: 30_000 })).toBe(true)
      expect(yield* check(A, { claimant: B, heartbeatAtMs: 0, nowMs: 30_001 })).toBe(false)
      expect(yield* check(A, { claimant: B, heartbeatAtMs: null, nowMs: 0 })).toBe(false)
      expect(Ownership.evidenceFor(A, B, 5)).toEqual({ expectedOwner: A, checkedAtMs: 5, kind: "same-host-pid-dead" })
      expect(Ownership.evidenceFor(A, C, 5)).toEqual({ expectedOwner: A, checkedAtMs: 5, kind: "lease-expired" })
      const probe = Ownership.probeFromCheck(check, 0)
      expect(yield* probe(A, C, 30_000)).toBeUndefined()
      expect(yield* probe(A, C, 30_001)).toEqual({ expectedOwner: A, checkedAtMs: 30_001, kind: "lease-expired" })
      expect(Ownership.sameHostIncarnation(A, B)).toBe(true)
      expect(Ownership.sameHostIncarnation(A, C)).toBe(false)
    }))
})
