/**
 * The ownership arbitration strategy the run store delegates to: two-phase
 * claim, grant generations, steal only on staleness plus liveness evidence,
 * and a commit-time guard. The journal declares the port; it has two
 * implementations: `layerLocal` keeps leases in memory (tests, single-process
 * hosts), and the run store's `SqlConsensus` (`@baton/run-store/SqlConsensus`)
 * keeps them on the run row (`flows_runs`), the only lease record in a database.
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { ConsensusError, fenceLost } from "./internal/consensusError.js"
import type { LivenessEvidence } from "./internal/evidence.js"
import { validate } from "./internal/consensusInput.js"
import * as LeaseRules from "./internal/leaseRules.js"
import { sameOwner } from "./internal/leaseRules.js"
import type { OwnerId } from "./OwnerId.js"

/**
 * Owner pulse period: 1 second.
 *
 * @since 0.1.0
 * @category constants
 */
export const heartbeatInterval: Duration.Duration = Duration.seconds(1)

/**
 * Staleness cutoff: a stamp is stale at `nowMs` iff it is `< nowMs - 30 000`.
 *
 * @since 0.1.0
 * @category constants
 */
export const heartbeatStaleAfter: Duration.Duration = Duration.seconds(30)

/**
 * How far a lease reading may lead the reference clock: 10 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const heartbeatSkewAllowance: Duration.Duration = Duration.seconds(10)

/**
 * `heartbeatStaleAfter - heartbeatSkewAllowance - heartbeatInterval` = 19 seconds:
 * an owner stops working this long after its last confirmed pulse.
 *
 * @since 0.1.0
 * @category constants
 */
export const heartbeatWriteTolerance: Duration.Duration = Duration.seconds(19)

export {
  /**
   * Proof that an owner is gone, probed at `checkedAtMs` (which must equal the
   * consuming operation's `nowMs`): `{ expectedOwner, checkedAtMs, kind }` with kind
   * `same-host-pid-dead`, `cross-host-unreachable-stale` or `lease-expired`.
   *
   * @since 0.1.0
   * @category schemas
   */
  LivenessEvidence
} from "./internal/evidence.js"

/**
 * Why a claim, steal or recovery did not take effect.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RejectionReason = Schema.Literal(
  "already_claimed",
  "owner_held",
  "owner_live",
  "evidence_invalid",
  "claim_fresh",
  "claim_changed",
  "unavailable"
)
/**
 * @since 0.1.0
 * @category models
 */
export type RejectionReason = typeof RejectionReason.Type

/**
 * A claim or steal took effect; `grantedAtMs` is the generation `activate` must present.
 *
 * @since 0.1.0
 * @category outcomes
 */
export const Granted = Schema.TaggedStruct("Granted", { grantedAtMs: Schema.Number })
/**
 * @since 0.1.0
 * @category outcomes
 */
export type Granted = typeof Granted.Type

/**
 * @since 0.1.0
 * @category outcomes
 */
export const Rejected = Schema.TaggedStruct("Rejected", { reason: RejectionReason })
/**
 * @since 0.1.0
 * @category outcomes
 */
export type Rejected = typeof Rejected.Type

/**
 * @since 0.1.0
 * @category outcomes
 */
export const Activated = Schema.TaggedStruct("Activated", {})
/**
 * @since 0.1.0
 * @category outcomes
 */
export type Activated = typeof Activated.Type

/**
 * The caller does not (or no longer) hold what the operation needs.
 *
 * @since 0.1.0
 * @category outcomes
 */
export const Lost = Schema.TaggedStruct("Lost", {})
/**
 * @since 0.1.0
 * @category outcomes
 */
export type Lost = typeof Lost.Type

/**
 * A heartbeat or reconfirm took effect; `heartbeatAtMs` is the stored (monotonic) stamp.
 *
 * @since 0.1.0
 * @category outcomes
 */
export const Renewed = Schema.TaggedStruct("Renewed", { heartbeatAtMs: Schema.Number })
/**
 * @since 0.1.0
 * @category outcomes
 */
export type Renewed = typeof Renewed.Type

/**
 * @since 0.1.0
 * @category outcomes
 */
export const Recovered = Schema.TaggedStruct("Recovered", {})
/**
 * @since 0.1.0
 * @category outcomes
 */
export type Recovered = typeof Recovered.Type

/**
 * `claim` and `steal`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type ClaimOutcome = Granted | Rejected
/**
 * @since 0.1.0
 * @category outcomes
 */
export type ActivateOutcome = Activated | Lost
/**
 * `heartbeat` and `reconfirm`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type RenewOutcome = Renewed | Lost
/**
 * @since 0.1.0
 * @category outcomes
 */
export type RecoverOutcome = Recovered | Rejected

export {
  /**
   * Strategy errors: `fence_lost` (`guard`), `persistence_failed` (storage; cause
   * kept for retry classification), `invalid_input` (argument named by `field`).
   *
   * @since 0.1.0
   * @category errors
   */
  ConsensusError,
  /**
   * The `fence_lost` error `guard` fails with.
   *
   * @since 0.1.0
   * @category errors
   */
  fenceLost,
  /**
   * The `persistence_failed` error a storage-backed strategy fails with when its
   * storage does (`operation` names the strategy method; the cause is kept for
   * retry classification).
   *
   * @since 0.2.0
   * @category errors
   */
  persistenceFailed
} from "./internal/consensusError.js"

export {
  /**
   * Checks a strategy method's arguments before any rule or I/O: the first
   * malformed one fails `invalid_input` naming its field. Every strategy calls it.
   *
   * @since 0.2.0
   * @category utils
   */
  validate
} from "./internal/consensusInput.js"

export {
  /**
   * Owner equality on all three fields.
   *
   * @since 0.1.0
   * @category utils
   */
  sameOwner,
  /**
   * Whether `evidence` proves `expectedOwner` gone for `observer` at `nowMs`: it
   * names that owner, was checked exactly at `nowMs`, and the host relation of its
   * kind holds (`same-host-pid-dead`: same host; `cross-host-unreachable-stale`:
   * different hosts; `lease-expired`: any host).
   *
   * @since 0.1.0
   * @category utils
   */
  matchesEvidence,
  /**
   * The I/O-free precondition of `steal` every strategy applies first: `evidence`
   * matches its `expectedOwner` for `claimant` at `nowMs` and does not name the
   * claimant itself.
   *
   * @since 0.2.0
   * @category utils
   */
  stealEvidenceValid,
  /**
   * Milliseconds after which a stamp is stale: 30 000 (`heartbeatStaleAfter`).
   *
   * @since 0.2.0
   * @category constants
   */
  staleAfterMs
} from "./internal/leaseRules.js"

/**
 * The strategy. Every `nowMs`/`grantedAtMs` is epoch milliseconds, a
 * non-negative safe integer supplied by the caller (no clock is read).
 * Losing a race is an outcome; the only rule-driven error is `guard`'s `fence_lost`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly claim: (runId: string, claimant: OwnerId, nowMs: number) => Effect.Effect<ClaimOutcome, ConsensusError>
  readonly activate: (
    runId: string,
    owner: OwnerId,
    grantedAtMs: number,
    nowMs: number
  ) => Effect.Effect<ActivateOutcome, ConsensusError>
  readonly heartbeat: (runId: string, owner: OwnerId, nowMs: number) => Effect.Effect<RenewOutcome, ConsensusError>
  readonly reconfirm: (runId: string, owner: OwnerId, nowMs: number) => Effect.Effect<RenewOutcome, ConsensusError>
  readonly release: (runId: string, owner: OwnerId) => Effect.Effect<void, ConsensusError>
  /**
   * Claims a run whose owner's heartbeat is stale (docs/design/fencing-and-leases.md): `Granted { grantedAtMs: nowMs }`
   * when the owner is `evidence.expectedOwner`, its heartbeat is stale and no claim is pending.
   * Checked first, before any I/O (nothing is written): `evidence` must pass
   * `matchesEvidence(evidence.expectedOwner, claimant, nowMs, evidence)` and must not name
   * `claimant` itself (`sameOwner`), else `Rejected evidence_invalid`. A self-steal is
   * refused because it proves nothing about liveness, and the
   * claimant's later `release` would clear the ownership along with the claim; re-own one's own
   * stale run with `release` + `claim`. Otherwise `evidence_invalid` (no row, no owner, owner ≠
   * expected), `already_claimed` (claim pending) or `owner_live` (heartbeat fresh).
   */
  readonly steal: (
    runId: string,
    claimant: OwnerId,
    nowMs: number,
    evidence: LivenessEvidence
  ) => Effect.Effect<ClaimOutcome, ConsensusError>
  readonly recover: (
    runId: string,
    staleClaimant: OwnerId,
    grantedAtMs: number,
    observer: OwnerId,
    nowMs: number,
    evidence: LivenessEvidence
  ) => Effect.Effect<RecoverOutcome, ConsensusError>
  readonly guard: (runId: string, owner: OwnerId) => Effect.Effect<void, ConsensusError>
  /**
   * Optional, for a strategy that keeps the fence in a row of the journal's own database: `query(runId,
   * owner)` is a `SELECT` yielding one row while `owner` holds `runId`'s fence (locking it `FOR SHARE` on
   * PostgreSQL) and none otherwise, the same rule as `guard`. A journal over the same `client` embeds it in
   * its append statement, so the fence costs no statement of its own; any other journal calls `guard`.
   *
   * @since 0.3.0
   */
  readonly fenceRow?: {
    readonly client: SqlClient.SqlClient
    readonly query: (runId: string, owner: OwnerId) => Statement.Fragment
  } | undefined
}

/**
 * @since 0.1.0
 * @category services
 */
export class Consensus extends Context.Tag("@baton/journal/Consensus")<Consensus, Service>() {}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (service: Service): Service => service

/**
 * The in-memory strategy over one `Map` per build: each operation is
 * synchronous, hence atomic in-process, but not transactional (a change made in
 * a transaction that rolls back stays).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeLocal: Effect.Effect<Service> = Effect.sync(() => {
  const leases = new Map<string, LeaseRules.Lease>()
  const apply = <A>(runId: string, step: (lease: LeaseRules.Lease | undefined) => LeaseRules.Step<A>): A => {
    const result = step(leases.get(runId))
    if (result.next === undefined || LeaseRules.isEmpty(result.next)) leases.delete(runId)
    else leases.set(runId, result.next)
    return result.outcome
  }
  return make({
    claim: (runId, claimant, nowMs) =>
      validate({ runId, claimant, nowMs }).pipe(
        Effect.map(() => apply(runId, (lease) => LeaseRules.claim(lease, claimant, nowMs)))
      ),
    activate: (runId, owner, grantedAtMs, nowMs) =>
      validate({ runId, owner, grantedAtMs, nowMs }).pipe(
        Effect.map(() => apply(runId, (lease) => LeaseRules.activate(lease, owner, grantedAtMs, nowMs)))
      ),
    heartbeat: (runId, owner, nowMs) =>
      validate({ runId, owner, nowMs }).pipe(
        Effect.map(() => apply(runId, (lease) => LeaseRules.heartbeat(lease, owner, nowMs, false)))
      ),
    reconfirm: (runId, owner, nowMs) =>
      validate({ runId, owner, nowMs }).pipe(
        Effect.map(() => apply(runId, (lease) => LeaseRules.heartbeat(lease, owner, nowMs, true)))
      ),
    release: (runId, owner) =>
      validate({ runId, owner }).pipe(
        Effect.map(() => apply(runId, (lease) => LeaseRules.release(lease, owner)))
      ),
    steal: (runId, claimant, nowMs, evidence) =>
      validate({ runId, claimant, nowMs, evidence }).pipe(
        Effect.map(() => apply(runId, (lease) => LeaseRules.steal(lease, claimant, nowMs, evidence)))
      ),
    recover: (runId, staleClaimant, grantedAtMs, observer, nowMs, evidence) =>
      validate({ runId, staleClaimant, grantedAtMs, observer, nowMs, evidence }).pipe(
        Effect.map(() =>
          apply(runId, (lease) => LeaseRules.recover(lease, staleClaimant, grantedAtMs, observer, nowMs, evidence))
        )
      ),
    guard: (runId, owner) =>
      validate({ runId, owner }).pipe(
        Effect.flatMap(() => {
          const lease = leases.get(runId)
          return lease?.owner !== undefined && sameOwner(lease.owner, owner)
            ? Effect.void
            : Effect.fail(fenceLost(runId, owner))
        })
      )
  })
})

/**
 * A strategy that grants nothing: `claim`/`steal`/`recover` → `Rejected
 * unavailable`; `activate`/`heartbeat`/`reconfirm` → `Lost`; `release` no-op;
 * `guard` → `fence_lost`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeNoop = (overrides: Partial<Service> = {}): Service =>
  make({
    claim: () => Effect.succeed(Rejected.make({ reason: "unavailable" })),
    activate: () => Effect.succeed(Lost.make({})),
    heartbeat: () => Effect.succeed(Lost.make({})),
    reconfirm: () => Effect.succeed(Lost.make({})),
    release: () => Effect.void,
    steal: () => Effect.succeed(Rejected.make({ reason: "unavailable" })),
    recover: () => Effect.succeed(Rejected.make({ reason: "unavailable" })),
    guard: (runId, owner) => Effect.fail(fenceLost(runId, owner)),
    ...overrides
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layerNoop = (overrides: Partial<Service> = {}): Layer.Layer<Consensus> =>
  Layer.succeed(Consensus, makeNoop(overrides))

/**
 * The in-memory strategy. Provide **one** build to both the journal and the run
 * store: a second build is a disjoint lease map.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerLocal: Layer.Layer<Consensus> = Layer.effect(Consensus, makeLocal)
