/**
 * Liveness checks and probes: how a would-be owner decides a recorded owner
 * is gone, and the `LivenessEvidence` it presents to `steal`, `claimAndOwn`
 * and `recoverClaim`. Platform neutral: the Node process probe lives in
 * `@baton/node`.
 *
 * @since 0.1.0
 */
import * as Consensus from "@baton/journal/Consensus"
import type * as OwnerIdModule from "@baton/journal/OwnerId"
import { Duration, Effect } from "effect"

/**
 * The fencing identity `{ hostId, pid, nonce }` (schema and type).
 *
 * @since 0.1.0
 * @category models
 */
export { OwnerId } from "@baton/journal/OwnerId"

/**
 * Evidence that a recorded owner is gone: `{ expectedOwner, checkedAtMs, kind }` with kind
 * `same-host-pid-dead`, `cross-host-unreachable-stale` or `lease-expired` (schema and type).
 *
 * @since 0.1.0
 * @category models
 */
export { LivenessEvidence } from "@baton/journal/Consensus"

/**
 * The four lease constants (`heartbeatInterval` 1 s, `heartbeatStaleAfter` 30 s,
 * `heartbeatSkewAllowance` 10 s, `heartbeatWriteTolerance` 19 s), the journal's own values.
 *
 * @since 0.1.0
 * @category constants
 */
export {
  heartbeatInterval,
  heartbeatSkewAllowance,
  heartbeatStaleAfter,
  heartbeatWriteTolerance
} from "@baton/journal/Consensus"

type OwnerId = OwnerIdModule.OwnerId

/**
 * An evidence factory: `undefined` means "no evidence" (the owner may be alive).
 *
 * @since 0.1.0
 * @category models
 */
export type LivenessProbe<E = never, R = never> = (
  expectedOwner: OwnerId,
  claimant: OwnerId,
  checkedAtMs: number
) => Effect.Effect<Consensus.LivenessEvidence | undefined, E, R>

/**
 * What a liveness check sees: the would-be owner, the recorded heartbeat stamp and the
 * reading (epoch ms).
 *
 * @since 0.1.0
 * @category models
 */
export interface LivenessContext {
  readonly claimant: OwnerId
  readonly heartbeatAtMs: number | null
  readonly nowMs: number
}

/**
 * "Is the recorded owner still working?": `true` refuses a takeover.
 *
 * @since 0.1.0
 * @category models
 */
export type LivenessCheck = (expectedOwner: OwnerId, context: LivenessContext) => Effect.Effect<boolean>

/**
 * Same host (hostId equality only): decides between `same-host-pid-dead` and other kinds.
 *
 * @since 0.1.0
 * @category predicates
 */
export const sameHostIncarnation = (expectedOwner: OwnerId, claimant: OwnerId): boolean =>
  expectedOwner.hostId === claimant.hostId

/**
 * Judges an owner by its lease alone: alive iff it has a stamp no older than `staleAfter`
 * (default 30 s; exactly 30 s old is alive, the store's strict cutoff).
 *
 * @since 0.1.0
 * @category constructors
 */
export const leaseLiveness = (
  staleAfter: Duration.DurationInput = Consensus.heartbeatStaleAfter
): LivenessCheck => {
  const staleAfterMs = Duration.toMillis(Duration.decode(staleAfter))
  return (_expectedOwner, context) =>
    Effect.succeed(context.heartbeatAtMs !== null && context.heartbeatAtMs >= context.nowMs - staleAfterMs)
}

/**
 * Evidence a claimant presents after its check said "dead": kind `same-host-pid-dead`
 * for a same-host owner, else `lease-expired`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const evidenceFor = (
  expectedOwner: OwnerId,
  claimant: OwnerId,
  checkedAtMs: number
): Consensus.LivenessEvidence => ({
  expectedOwner,
  checkedAtMs,
  kind: sameHostIncarnation(expectedOwner, claimant) ? "same-host-pid-dead" : "lease-expired"
})

/**
 * A probe over a check: alive ⇒ `undefined`, else `evidenceFor(expectedOwner, claimant, checkedAtMs)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const probeFromCheck = (check: LivenessCheck, heartbeatAtMs: number | null): LivenessProbe =>
(expectedOwner, claimant, checkedAtMs) =>
  Effect.map(
    check(expectedOwner, { claimant, heartbeatAtMs, nowMs: checkedAtMs }),
    (alive) => alive ? undefined : evidenceFor(expectedOwner, claimant, checkedAtMs)
  )
