/**
 * Run-store counters (Effect `Metric`, global registry): one counter per
 * family, viewed per outcome tag with `Metric.tagged`.
 *
 * @since 0.1.0
 */
import { Metric, Record } from "effect"
import type * as model from "./internal/model.js"

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

/** One counter per outcome tag of `A`: `tags` names each of them once (the compiler checks it). */
const byOutcome = <A extends { readonly _tag: string }>(
  base: Metric.Metric.Counter<number>,
  tags: { readonly [K in A["_tag"]]: null }
): ByOutcome<A["_tag"]> => Object.freeze(Record.map(tags, (_, tag) => Metric.tagged(base, "outcome", snakeCase(tag))))

const op = (name: string) => Metric.tagged(claims, "op", name)

/**
 * `claim` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const claim = byOutcome<model.ClaimOutcome>(op("claim"), {
  Claimed: null,
  NotFound: null,
  AlreadyClaimed: null,
  HeartbeatFresh: null,
  SnapshotChanged: null
})

/**
 * `claimAndOwn` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const claimAndOwn = byOutcome<model.ClaimAndOwnOutcome>(op("claim_and_own"), {
  Activated: null,
  NotFound: null,
  AlreadyClaimed: null,
  HeartbeatFresh: null,
  SnapshotChanged: null,
  EvidenceRequired: null
})

/**
 * `claimAndOwnMany` counters, per run of the batch: `Activated`, `Missed`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const claimAndOwnMany = byOutcome<model.ClaimAndOwnManyOutcome>(op("claim_and_own_many"), { Activated: null, Missed: null })

/**
 * `activate` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const activate = byOutcome<model.ActivateOutcome>(op("activate"), { Activated: null, ClaimLost: null, SnapshotChanged: null })

/**
 * `abandonClaim` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const abandonClaim = byOutcome<model.AbandonClaimOutcome>(op("abandon_claim"), { Abandoned: null, ClaimLost: null })

/**
 * `recoverClaim` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const recoverClaim = byOutcome<model.RecoverClaimOutcome>(op("recover_claim"), {
  Recovered: null,
  NotFound: null,
  ClaimFresh: null,
  ClaimChanged: null,
  LivenessUnconfirmed: null
})

/**
 * `steal` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const steal = byOutcome<model.StealOutcome>(op("steal"), {
  Claimed: null,
  NotFound: null,
  AlreadyClaimed: null,
  HeartbeatFresh: null,
  SnapshotChanged: null,
  LivenessUnconfirmed: null
})

/**
 * `heartbeat`/`reconfirm` outcome counters.
 *
 * @since 0.1.0
 * @category metrics
 */
export const heartbeat = byOutcome<model.HeartbeatOutcome>(heartbeats, { Updated: null, FenceLost: null, NotFound: null })

/**
 * `transitionOwned` outcome counters (tag `to` at the update site).
 *
 * @since 0.1.0
 * @category metrics
 */
export const transition = byOutcome<model.TransitionOutcome>(transitions, {
  Transitioned: null,
  FenceLost: null,
  NotFound: null,
  GuardFailed: null
})
