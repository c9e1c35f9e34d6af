/**
 * Fenced run persistence: one `flows_runs` row per durable run is the
 * authority on its status and owner, and every ownership move is one
 * compare-and-swap in one write transaction, arbitrated by the injected
 * `Consensus` strategy and journaled on the run's companion stream.
 *
 * Losing a race is a successful Effect carrying a tagged outcome; the error
 * channel is for invalid input, corrupt rows, constraint violations and
 * database failure. `state_json` is stored byte-exact and never redacted, so
 * the database is a secret store.
 *
 * @since 0.1.0
 */
import type * as DurableWriter from "@baton/database/DurableWriter"
import type * as Consensus from "@baton/journal/Consensus"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import * as model from "./internal/model.js"
import * as ClaimMany from "./internal/store/claimMany.js"
import * as Heartbeats from "./internal/store/heartbeats.js"
import * as Released from "./internal/store/released.js"
import * as Store from "./internal/store/make.js"
import * as SqlConsensus from "./SqlConsensus.js"

/**
 * The six run statuses: `pending`, `running`, `suspended`, `completed`, `failed`, `cancelled`.
 *
 * @since 0.1.0
 * @category models
 */
export const RunStatus = model.RunStatus

/**
 * @since 0.1.0
 * @category models
 */
export type RunStatus = model.RunStatus

/**
 * The settled statuses: `completed`, `failed`, `cancelled`.
 *
 * @since 0.1.0
 * @category models
 */
export const TerminalRunStatus = model.TerminalRunStatus

/**
 * @since 0.1.0
 * @category models
 */
export type TerminalRunStatus = model.TerminalRunStatus

/**
 * True for `completed`, `failed` and `cancelled`.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isTerminalRunStatus: (status: RunStatus) => status is TerminalRunStatus = model.isTerminalRunStatus

/**
 * Deepest admitted run-state JSON value (the root is depth 0).
 *
 * @since 0.1.0
 * @category constants
 */
export const maximumRunJsonDepth = model.maximumRunJsonDepth

/**
 * Most JSON values (and array elements plus object entries) in one run state.
 *
 * @since 0.1.0
 * @category constants
 */
export const maximumRunJsonNodes = model.maximumRunJsonNodes

/**
 * Stable error codes: `invalid_run` (admission), `not_found_row` (`get`/`latestRound` of an
 * unknown id), `constraint`, `decode_failed`, `persistence_failed`.
 *
 * @since 0.1.0
 * @category errors
 */
export const RunStoreErrorCode = model.RunStoreErrorCode

/**
 * @since 0.1.0
 * @category errors
 */
export type RunStoreErrorCode = model.RunStoreErrorCode

/**
 * The run store's error. `message` is `<code>: RunStore.<method>: <detail>`; `cause` never
 * carries state text, bound parameters or driver messages (for `invalid_run` it is
 * `{ field, detail, ... }`; for database failures `{ category, cause: DatabaseError }`; for any
 * other failure of a write `{ category: "persistence_failed", reason }`, `reason` its `_tag` or `"unknown"`).
 *
 * @since 0.1.0
 * @category errors
 */
export { RunStoreError } from "./internal/model.js"

/**
 * What a compare-and-swap compares: status, owner and heartbeat stamp (epoch ms).
 * A `RunRow` from `get` is accepted wherever a snapshot is expected.
 *
 * @since 0.1.0
 * @category models
 */
export type RunSnapshot = model.RunSnapshot

/**
 * A decoded, frozen `flows_runs` row (times in epoch ms; `claim` is a pending two-phase claim).
 *
 * @since 0.1.0
 * @category models
 */
export type RunRow = model.RunRow

/**
 * `create` options: parent run (an existing run other than the one being created), and lineage id
 * plus round ordinal (both or neither).
 *
 * @since 0.1.0
 * @category models
 */
export type CreateOptions = model.CreateOptions

/**
 * One run for `createReleased`: its id, its state JSON and `create`'s options.
 *
 * @since 0.2.0
 * @category models
 */
export type ReleasedRun = model.ReleasedRun

/**
 * Most runs one `createReleased` statement writes (1,000): longer lists are split into chunks of
 * this size, one `INSERT` each, all in one write.
 *
 * @since 0.2.0
 * @category constants
 */
export const createReleasedChunkSize: number = Released.chunkSize

/**
 * Most runs one `createReleased` call accepts (10,000).
 *
 * @since 0.2.0
 * @category constants
 */
export const createReleasedMaxRuns: number = Released.maxRuns

/**
 * A predicate `transitionOwned` checks in its own transaction: `cancelRequested`
 * `"absent"` or `"present"`; `{}` checks nothing.
 *
 * @since 0.1.0
 * @category models
 */
export const TransitionGuard = model.TransitionGuard

/**
 * @since 0.1.0
 * @category models
 */
export type TransitionGuard = model.TransitionGuard

/**
 * `requestCancel`/`requestCancelLineage`: `CancelRequested`, `AlreadyRequested` (the stored
 * request time), `NotFound`, `Terminal`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type RequestCancelOutcome = model.RequestCancelOutcome

/**
 * Constructors, `$is` and `$match` of {@link RequestCancelOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const RequestCancelOutcome = model.RequestCancelOutcome

/**
 * `claim`: `Claimed { claimedAtMs }` (the token `activate` needs), `NotFound`,
 * `AlreadyClaimed`, `HeartbeatFresh`, `SnapshotChanged`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type ClaimOutcome = model.ClaimOutcome

/**
 * Constructors, `$is` and `$match` of {@link ClaimOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const ClaimOutcome = model.ClaimOutcome

/**
 * `steal`: a `ClaimOutcome` or `LivenessUnconfirmed` (evidence did not match, or the claimant is the
 * recorded owner: re-own one's own stale run with `claimAndOwn`).
 *
 * @since 0.1.0
 * @category outcomes
 */
export type StealOutcome = model.StealOutcome

/**
 * Constructors, `$is` and `$match` of {@link StealOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const StealOutcome = model.StealOutcome

/**
 * `claimAndOwn`: `Activated`, `NotFound`, `AlreadyClaimed`, `HeartbeatFresh`,
 * `SnapshotChanged`, `EvidenceRequired` (a stale foreign owner and no matching evidence).
 *
 * @since 0.1.0
 * @category outcomes
 */
export type ClaimAndOwnOutcome = model.ClaimAndOwnOutcome

/**
 * Constructors, `$is` and `$match` of {@link ClaimAndOwnOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const ClaimAndOwnOutcome = model.ClaimAndOwnOutcome

/**
 * `activate`: `Activated`, `ClaimLost`, `SnapshotChanged` (the claim was released). The stamp it
 * installs is read from Effect's `Clock` and bounded like every lease reading: more than 10 s ahead of
 * the reference clock (the database's on PostgreSQL) fails `invalid_run` (`nowMs`) and writes nothing.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type ActivateOutcome = model.ActivateOutcome

/**
 * Constructors, `$is` and `$match` of {@link ActivateOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const ActivateOutcome = model.ActivateOutcome

/**
 * `abandonClaim`: `Abandoned` or `ClaimLost`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type AbandonClaimOutcome = model.AbandonClaimOutcome

/**
 * Constructors, `$is` and `$match` of {@link AbandonClaimOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const AbandonClaimOutcome = model.AbandonClaimOutcome

/**
 * `recoverClaim`: `Recovered`, `NotFound`, `ClaimFresh`, `ClaimChanged`, `LivenessUnconfirmed`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type RecoverClaimOutcome = model.RecoverClaimOutcome

/**
 * Constructors, `$is` and `$match` of {@link RecoverClaimOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const RecoverClaimOutcome = model.RecoverClaimOutcome

/**
 * `heartbeat`/`reconfirm`: `Updated { heartbeatAtMs }` carrying the stored (possibly
 * unchanged) stamp, `FenceLost`, `NotFound`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type HeartbeatOutcome = model.HeartbeatOutcome

/**
 * Constructors, `$is` and `$match` of {@link HeartbeatOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const HeartbeatOutcome = model.HeartbeatOutcome

/**
 * One lease for `heartbeatLeases`: the run and the owner (`{ hostId, pid, nonce }`) that holds it.
 *
 * @since 0.2.0
 * @category models
 */
export type RunLease = model.RunLease

/**
 * Most runs one batched heartbeat statement renews (1,000): `heartbeatMany` and
 * `heartbeatLeases` split longer lists into chunks of this size, one statement each.
 *
 * @since 0.2.0
 * @category constants
 */
export const heartbeatChunkSize: number = Heartbeats.chunkSize

/**
 * One run of `claimAndOwnMany`: `{ runId, expectedStatus: "pending" | "suspended", expectedState, stateJson }`.
 *
 * @since 0.3.0
 * @category models
 */
export type ReleasedClaim = model.ReleasedClaim

/**
 * `claimAndOwnMany`, per run: `Activated`, or `Missed` (the row had moved on; nothing written for it).
 *
 * @since 0.3.0
 * @category outcomes
 */
export type ClaimAndOwnManyOutcome = model.ClaimAndOwnManyOutcome

/**
 * Constructors, `$is` and `$match` of {@link ClaimAndOwnManyOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const ClaimAndOwnManyOutcome = model.ClaimAndOwnManyOutcome

/**
 * Most runs one `claimAndOwnMany` takes (100).
 *
 * @since 0.3.0
 * @category constants
 */
export const claimAndOwnManyMax: number = ClaimMany.maxClaims

/**
 * The write key of `owner`'s batch claims (its host and pid): a caller that opens a write around
 * `claimAndOwnMany` with this key takes no second key lock on PostgreSQL.
 *
 * @since 0.3.0
 * @category constants
 */
export const claimAndOwnManyKey: (owner: model.OwnerIdType) => string = ClaimMany.keyOf

/**
 * `transitionOwned`: `Transitioned`, `FenceLost`, `NotFound`, `GuardFailed`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type TransitionOutcome = model.TransitionOutcome

/**
 * Constructors, `$is` and `$match` of {@link TransitionOutcome}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const TransitionOutcome = model.TransitionOutcome

/**
 * Ownership facts on the companion stream: `claimed`, `activated`, `released`, `stolen`, `expired`.
 *
 * @since 0.1.0
 * @category models
 */
export const OwnershipTransition = model.OwnershipTransition

/**
 * @since 0.1.0
 * @category models
 */
export type OwnershipTransition = model.OwnershipTransition

/**
 * The companion stream name of ownership facts: `"run-store"`.
 *
 * @since 0.1.0
 * @category constants
 */
export const companionStream: "run-store" = model.companionStream

/**
 * Event type of an ownership fact: `"flows.consensus." + transition`.
 *
 * @since 0.1.0
 * @category constants
 */
export const ownershipEventType: (transition: OwnershipTransition) => string = model.ownershipEventType

/**
 * The run store's operations. Every method has no context requirement; an optional
 * `Journal` in the caller's context receives the ownership facts.
 *
 * Batched heartbeats (`@since 0.2.0`): `heartbeatMany(owner, runIds, nowMs)` renews every
 * listed run `owner` owns and answers a `ReadonlyMap` from each distinct run id to its
 * `HeartbeatOutcome`; `heartbeatLeases(leases, nowMs)` renews runs held by different owners
 * (a host's runs each carry the nonce of their own claim) and answers one outcome per lease, in
 * order. Both follow `heartbeat`'s rules per run: `Updated { heartbeatAtMs }` with the stored
 * (never lowered) stamp, `FenceLost` (another owner, not running, terminal) or `NotFound`; `nowMs`
 * (epoch ms) is bounded by the reference clock like every lease reading (more than 10 s ahead
 * fails `invalid_run` naming `nowMs`, nothing written). Over the row strategy each chunk of at
 * most {@link heartbeatChunkSize} runs is one statement (PostgreSQL: one autocommit `UPDATE`;
 * SQLite: one `BEGIN IMMEDIATE` transaction), and only runs it did not renew are read again, in
 * one statement, to name their outcome; over any other strategy each run is its own `heartbeat`.
 * Duplicate ids (or leases) are allowed and renewed once; an empty list sends nothing. Bad input
 * fails `invalid_run` naming the field (`runIds[3]`, `leases[2].owner.pid`, `owner`, `nowMs`).
 *
 * Batched claims (`@since 0.3.0`): `claimAndOwnMany(claims, owner, nowMs, limit?)` claims and
 * owns, in the order given, the first `limit` (default all) listed runs that nobody owns or claims
 * and whose status and `state_json` are still their `expectedStatus` (`pending` or `suspended`) and
 * `expectedState` (a compare-and-swap), as `claimAndOwn` would for each: owner, generation and
 * lease stamp `nowMs`, the waiting columns cleared, and the run's `stateJson` installed by the same
 * update; the ownership facts `claimed` and `activated` per run. Answers a `ReadonlyMap` from each
 * run id to `Activated` or `Missed` (the row had moved on, was gone, was held by another writer, or
 * fell past `limit`; nothing written for it). Over the row strategy the batch is one `UPDATE`
 * (PostgreSQL: rows another writer holds are skipped, and the facts ride in the same statement, sent
 * alone in autocommit; SQLite: one `BEGIN IMMEDIATE` transaction with two statements of facts per
 * claimed run), joined to the caller's write when one is open; over any other strategy each run is
 * its own `claimAndOwn` and owned transition (its stored state not compared). At most {@link claimAndOwnManyMax} runs; bad input
 * fails `invalid_run` naming the field (`claims[2].runId`, `claims[0].expectedStatus`, `owner`,
 * `nowMs`, `limit`), nothing written.
 *
 * Batched creation (`@since 0.2.0`): `createReleased(runs)` creates every listed run in one write,
 * already released (status `suspended`, no owner and no claim, `startedAtMs` = `createdAtMs`, from
 * Effect's `Clock`): the row `create`, `claimAndOwn` and `transitionOwned(…, "suspended", state)`
 * leave, without the ownership facts of an owner that never ran it (its first claim states `claimed`
 * and `activated`). Each chunk of {@link createReleasedChunkSize} runs is one multi-row `INSERT` (SQLite:
 * plus one read of the next `row_seq`); inside a caller's write it joins that write. All or none: an id
 * that already has a row fails `constraint` naming it; bad input fails `invalid_run` naming
 * `runs[i].<field>` (`runs[2].runId`, `runs[0].options.parentRunId`; an id repeated in the list
 * too), more than {@link createReleasedMaxRuns} runs fail naming `runs`; nothing is written. An empty
 * list sends nothing.
 *
 * @since 0.1.0
 * @category models
 */
export type Service = model.Service

/**
 * @since 0.1.0
 * @category services
 */
export class RunStore extends Context.Tag("@baton/run-store/RunStore")<RunStore, Service>() {}

/**
 * The SQL run store over the context's client, writer and `Consensus` strategy.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Service, never, Consensus.Consensus | DurableWriter.DurableWriter | SqlClient.SqlClient> =
  Store.make

const noStore = (method: string) =>
  Effect.fail(
    new model.RunStoreError({
      code: "persistence_failed",
      method,
      message: `persistence_failed: RunStore.${method}: no run store in this environment`,
      cause: method
    })
  )

/**
 * A store for environments without persistence: reads, `create` and `createReleased` fail
 * `persistence_failed`; compare-and-swap methods answer `NotFound` (the batched
 * heartbeats `NotFound` for every run); `activate` and
 * `abandonClaim` answer `ClaimLost`; `acknowledgeCancel` answers `false`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeNoop = (overrides?: Partial<Service>): Service => {
  return Object.freeze({
    create: () => noStore("create"),
    createReleased: () => noStore("createReleased"),
    get: () => noStore("get"),
    lineage: () => noStore("lineage"),
    latestRound: () => noStore("latestRound"),
    requestCancelLineage: () => noStore("requestCancelLineage"),
    requestCancel: () => Effect.succeed(model.RequestCancelOutcome.NotFound()),
    claim: () => Effect.succeed(model.ClaimOutcome.NotFound()),
    claimAndOwn: () => Effect.succeed(model.ClaimAndOwnOutcome.NotFound()),
    claimAndOwnMany: (claims: ReadonlyArray<model.ReleasedClaim>) =>
      Effect.succeed(
        new Map<string, model.ClaimAndOwnManyOutcome>(Array.from(claims, (c) => [c.runId, model.ClaimAndOwnManyOutcome.Missed()]))
      ),
    recoverClaim: () => Effect.succeed(model.RecoverClaimOutcome.NotFound()),
    heartbeat: () => Effect.succeed(model.HeartbeatOutcome.NotFound()),
    reconfirm: () => Effect.succeed(model.HeartbeatOutcome.NotFound()),
    heartbeatMany: (_owner: model.OwnerIdType, runIds: ReadonlyArray<string>) =>
      Effect.succeed(
        new Map<string, model.HeartbeatOutcome>(Array.from(runIds, (runId) => [runId, model.HeartbeatOutcome.NotFound()]))
      ),
    heartbeatLeases: (leases: ReadonlyArray<model.RunLease>) =>
      Effect.succeed(Array.from(leases, () => model.HeartbeatOutcome.NotFound())),
    transitionOwned: () => Effect.succeed(model.TransitionOutcome.NotFound()),
    steal: () => Effect.succeed(model.StealOutcome.NotFound()),
    activate: () => Effect.succeed(model.ActivateOutcome.ClaimLost()),
    abandonClaim: () => Effect.succeed(model.AbandonClaimOutcome.ClaimLost()),
    acknowledgeCancel: () => Effect.succeed(false),
    ...overrides
  })
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layerNoop = (overrides?: Partial<Service>): Layer.Layer<RunStore> =>
  Layer.succeed(RunStore, makeNoop(overrides))

/**
 * The SQL store over an injected `Consensus`: give it the same strategy instance the
 * journal fences through. Over this package's `SqlConsensus` on the same client the
 * store asks the strategy nothing (its own statements carry the lease predicates);
 * any other strategy (`Consensus.layerLocal`) is asked and mirrored onto the row.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith: Layer.Layer<RunStore, never, Consensus.Consensus | DurableWriter.DurableWriter | SqlClient.SqlClient> =
  Layer.effect(RunStore, make)

/**
 * The SQL store over its own `SqlConsensus` (the run row is the lease record). It provides
 * only `RunStore`, not `Consensus`: when a journal runs beside it, build one
 * `SqlConsensus.layer` (this package's) and give it to both {@link layerWith} and
 * `SqlJournal.layerWith()` instead, so the journal's fenced writes check the same row.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<RunStore, never, DurableWriter.DurableWriter | SqlClient.SqlClient> = Layer.provide(
  layerWith,
  SqlConsensus.layer
)
