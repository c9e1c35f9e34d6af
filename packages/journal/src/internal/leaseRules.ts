/**
 * The Consensus lease rules (docs/design/fencing-and-leases.md) as pure functions over one lease
 * record; `Consensus.layerLocal` applies them to a `Map`, and the conditional
 * statements of the run store's row strategy encode the same predicates.
 *
 * @internal
 */
import type { OwnerId } from "../OwnerId.js"
import type { LivenessEvidence } from "./evidence.js"

/** Milliseconds after which a stamp is stale (`heartbeatStaleAfter`). */
export const staleAfterMs = 30_000

export interface Lease {
  readonly owner?: OwnerId | undefined
  readonly grantedAtMs?: number | undefined
  readonly heartbeatAtMs?: number | undefined
  readonly claim?: OwnerId | undefined
  readonly claimedAtMs?: number | undefined
}

export interface Step<A> {
  readonly outcome: A
  readonly next: Lease | undefined
}

type Reason = "already_claimed" | "owner_held" | "owner_live" | "evidence_invalid" | "claim_fresh" | "claim_changed"
type Granted = { readonly _tag: "Granted"; readonly grantedAtMs: number }
type Rejected = { readonly _tag: "Rejected"; readonly reason: Reason }
type Lost = { readonly _tag: "Lost" }

export const granted = (grantedAtMs: number): Granted => ({ _tag: "Granted", grantedAtMs })
export const rejected = (reason: Reason): Rejected => ({ _tag: "Rejected", reason })
export const lost: Lost = { _tag: "Lost" }

export const sameOwner = (left: OwnerId, right: OwnerId): boolean =>
  left.hostId === right.hostId && left.pid === right.pid && left.nonce === right.nonce

export const matchesEvidence = (
  expectedOwner: OwnerId,
  observer: OwnerId,
  nowMs: number,
  evidence: LivenessEvidence
): boolean => {
  if (!sameOwner(expectedOwner, evidence.expectedOwner)) return false
  if (evidence.checkedAtMs !== nowMs) return false
  switch (evidence.kind) {
    case "same-host-pid-dead":
      return expectedOwner.hostId === observer.hostId
    case "cross-host-unreachable-stale":
      return expectedOwner.hostId !== observer.hostId
    case "lease-expired":
      return true
  }
}

/**
 * The I/O-free precondition of `steal`, shared by every strategy: `evidence`
 * matches (`matchesEvidence(evidence.expectedOwner, claimant, …)`) and does not
 * name the claimant itself. A self-steal proves nothing about liveness, and the
 * claimant's later `release` would clear the ownership along with the claim
 * (re-own via `release` + `claim`).
 */
export const stealEvidenceValid = (claimant: OwnerId, nowMs: number, evidence: LivenessEvidence): boolean =>
  !sameOwner(evidence.expectedOwner, claimant) && matchesEvidence(evidence.expectedOwner, claimant, nowMs, evidence)

/** Stale iff strictly older than `nowMs - 30 000`. */
export const isStale = (stampMs: number, nowMs: number): boolean => stampMs < nowMs - staleAfterMs

export const isEmpty = (lease: Lease): boolean => lease.owner === undefined && lease.claim === undefined

const same = (left: OwnerId | undefined, right: OwnerId): boolean => left !== undefined && sameOwner(left, right)

export const claim = (lease: Lease | undefined, claimant: OwnerId, nowMs: number): Step<Granted | Rejected> => {
  if (lease?.claim !== undefined) return { outcome: rejected("already_claimed"), next: lease }
  if (lease?.owner !== undefined) return { outcome: rejected("owner_held"), next: lease }
  return { outcome: granted(nowMs), next: { ...lease, claim: claimant, claimedAtMs: nowMs } }
}

export const activate = (
  lease: Lease | undefined,
  owner: OwnerId,
  grantedAtMs: number,
  nowMs: number
): Step<{ readonly _tag: "Activated" } | Lost> => {
  if (lease === undefined || !same(lease.claim, owner) || lease.claimedAtMs !== grantedAtMs) {
    return { outcome: lost, next: lease }
  }
  return {
    outcome: { _tag: "Activated" },
    next: { owner, grantedAtMs, heartbeatAtMs: nowMs, claim: undefined, claimedAtMs: undefined }
  }
}

export const heartbeat = (
  lease: Lease | undefined,
  owner: OwnerId,
  nowMs: number,
  requireNoClaim: boolean
): Step<{ readonly _tag: "Renewed"; readonly heartbeatAtMs: number } | Lost> => {
  if (lease === undefined || !same(lease.owner, owner)) return { outcome: lost, next: lease }
  if (requireNoClaim && lease.claim !== undefined) return { outcome: lost, next: lease }
  const heartbeatAtMs = Math.max(lease.heartbeatAtMs ?? nowMs, nowMs)
  return { outcome: { _tag: "Renewed", heartbeatAtMs }, next: { ...lease, heartbeatAtMs } }
}

export const release = (lease: Lease | undefined, owner: OwnerId): Step<void> => {
  if (lease === undefined) return { outcome: undefined, next: undefined }
  let next: Lease = lease
  if (same(next.claim, owner)) next = { ...next, claim: undefined, claimedAtMs: undefined }
  if (same(next.owner, owner)) next = { ...next, owner: undefined, grantedAtMs: undefined, heartbeatAtMs: undefined }
  return { outcome: undefined, next }
}

export const steal = (
  lease: Lease | undefined,
  claimant: OwnerId,
  nowMs: number,
  evidence: LivenessEvidence
): Step<Granted | Rejected> => {
  if (!stealEvidenceValid(claimant, nowMs, evidence)) {
    return { outcome: rejected("evidence_invalid"), next: lease }
  }
  if (lease === undefined || !same(lease.owner, evidence.expectedOwner)) {
    return { outcome: rejected("evidence_invalid"), next: lease }
  }
  if (lease.claim !== undefined) return { outcome: rejected("already_claimed"), next: lease }
  if (!isStale(lease.heartbeatAtMs ?? 0, nowMs)) return { outcome: rejected("owner_live"), next: lease }
  return { outcome: granted(nowMs), next: { ...lease, claim: claimant, claimedAtMs: nowMs } }
}

export const recover = (
  lease: Lease | undefined,
  staleClaimant: OwnerId,
  grantedAtMs: number,
  observer: OwnerId,
  nowMs: number,
  evidence: LivenessEvidence
): Step<{ readonly _tag: "Recovered" } | Rejected> => {
  if (!matchesEvidence(staleClaimant, observer, nowMs, evidence)) {
    return { outcome: rejected("evidence_invalid"), next: lease }
  }
  if (lease === undefined || !same(lease.claim, staleClaimant) || lease.claimedAtMs !== grantedAtMs) {
    return { outcome: rejected("claim_changed"), next: lease }
  }
  if (!isStale(grantedAtMs, nowMs)) return { outcome: rejected("claim_fresh"), next: lease }
  return { outcome: { _tag: "Recovered" }, next: { ...lease, claim: undefined, claimedAtMs: undefined } }
}
