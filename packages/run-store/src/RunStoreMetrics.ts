/**
 * Run-store counters (Effect `Metric`, global registry): one counter per
 * family, viewed per outcome tag with `Metric.tagged`.
 *
 * @since 0.1.0
 */
import { Metric } from "effect"

/**
 * Claim-family outcomes, attributes `op` (`claim`, `claim_and_own`, `activate`,
 * `abandon_claim`, `recover_claim`, `steal`) and `outcome`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const claims: Metric.Metric.Counter<number> = Metric.counter("flows_run_claims")

/**
 * Heartbeat and reconfirm outcomes, attribute `outcome`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const heartbeats: Metric.Metric.Counter<number> = Metric.counter("flows_run_heartbeats")

/**
 * `transitionOwned` outcomes, attributes `outcome` and `to` (the requested status).
 *
 * @since 0.1.0
 * @category metrics
 */
export const transitions: Metric.Metric.Counter<number> = Metric.counter("flows_run_transitions")

/**
 * Committed terminal transitions (incremented after the outermost commit only).
 *
 * @since 0.1.0
 * @category metrics
 */
export const runThroughput: Metric.Metric.Counter<number> = Metric.counter("flows_run_throughput")

/**
 * Snake case of an outcome tag: `HeartbeatFresh` → `heartbeat_fresh`.
 *
 * @since 0.1.0
 * @category utils
 */
export const snakeCase = (tag: string): string =>
  tag.replace(/([a-z0-9])([A-Z])/g, "$1_$2").replace(/([A-Z])([A-Z][a-z])/g, "$1_$2").toLowerCase()

type ByOutcome<Tags extends string> = { readonly [K in Tags]: Metric.Metric.Counter<number> }

const byOutcome = <const Tags extends ReadonlyArray<string>>(
  base: Metric.Metric.Counter<number>,
  tags: Tags
): ByOutcome<Tags[number]> =>
  Object.freeze(Object.fromEntries(tags.map((tag) => [tag, Metric.tagged(base, "outcome", snakeCase(tag))]))) as ByOutcome<
    Tags[number]
  >

const op = (name: string) => Metric.tagged(claims, "op", name)

/**
 * `claim` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const claim = byOutcome(op("claim"), ["Claimed", "NotFound", "AlreadyClaimed", "HeartbeatFresh", "SnapshotChanged"])

/**
 * `claimAndOwn` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const claimAndOwn = byOutcome(op("claim_and_own"), [
  "Activated",
  "NotFound",
  "AlreadyClaimed",
  "HeartbeatFresh",
  "SnapshotChanged",
  "EvidenceRequired"
])

/**
 * `claimAndOwnMany` counters, per run of the batch: `Activated`, `Missed`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const claimAndOwnMany = byOutcome(op("claim_and_own_many"), ["Activated", "Missed"])

/**
 * `activate` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const activate = byOutcome(op("activate"), ["Activated", "ClaimLost", "SnapshotChanged"])

/**
 * `abandonClaim` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const abandonClaim = byOutcome(op("abandon_claim"), ["Abandoned", "ClaimLost"])

/**
 * `recoverClaim` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const recoverClaim = byOutcome(op("recover_claim"), [
  "Recovered",
  "NotFound",
  "ClaimFresh",
  "ClaimChanged",
  "LivenessUnconfirmed"
])

/**
 * `steal` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const steal = byOutcome(op("steal"), [
  "Claimed",
  "NotFound",
  "AlreadyClaimed",
  "HeartbeatFresh",
  "SnapshotChanged",
  "LivenessUnconfirmed"
])

/**
 * `heartbeat`/`reconfirm` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const heartbeat = byOutcome(heartbeats, ["Updated", "FenceLost", "NotFound"])

/**
 * `transitionOwned` outcome counters (tag `to` at the update site).
 *
 * @since 0.1.0
 * @category metrics
 */
export const transition = byOutcome(transitions, ["Transitioned", "FenceLost", "NotFound", "GuardFailed"])
