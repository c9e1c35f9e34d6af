/**
 * Run-store models, outcomes and the error type, shared by the public
 * `RunStore` module and the internal operations (kept here so the operations
 * never import the public module that imports them).
 */
import type * as Consensus from "@baton/journal/Consensus"
import type * as OwnerId from "@baton/journal/OwnerId"
import type { Effect } from "effect"
import { Data, Schema } from "effect"

export const RunStatus = Schema.Literal("pending", "running", "suspended", "completed", "failed", "cancelled")
export type RunStatus = Schema.Schema.Type<typeof RunStatus>

export const TerminalRunStatus = Schema.Literal("completed", "failed", "cancelled")
export type TerminalRunStatus = "completed" | "failed" | "cancelled"

const statuses: ReadonlyArray<string> = RunStatus.literals
export const isRunStatus = (value: unknown): value is RunStatus =>
  typeof value === "string" && statuses.includes(value)

export const isTerminalRunStatus = (status: RunStatus): status is TerminalRunStatus =>
  status === "completed" || status === "failed" || status === "cancelled"

export const maximumRunJsonDepth = 128
export const maximumRunJsonNodes = 100_000

export const RunStoreErrorCode = Schema.Literal(
  "invalid_run",
  "not_found_row",
  "constraint",
  "decode_failed",
  "persistence_failed"
)
export type RunStoreErrorCode = Schema.Schema.Type<typeof RunStoreErrorCode>

export class RunStoreError extends Schema.TaggedError<RunStoreError>()("@baton/run-store/RunStoreError", {
  code: RunStoreErrorCode,
  method: Schema.String,
  message: Schema.String,
  cause: Schema.Unknown
}) {}

export type OwnerIdType = OwnerId.OwnerId
export type LivenessEvidence = Consensus.LivenessEvidence

export interface RunSnapshot {
  readonly status: RunStatus
  readonly owner: OwnerIdType | null
  readonly heartbeatAtMs: number | null
}

export interface RunRow extends RunSnapshot {
  readonly runId: string
  readonly createdAtMs: number
  readonly startedAtMs: number | null
  readonly finishedAtMs: number | null
  readonly claim: OwnerIdType | null
  readonly claimedAtMs: number | null
  readonly parentRunId: string | null
  readonly cancelRequestedAtMs: number | null
  readonly lineageId?: string | null | undefined
  readonly roundOrdinal?: number | null | undefined
  readonly stateJson: string
}

export interface CreateOptions {
  readonly parentRunId?: string | undefined
  readonly lineageId?: string | undefined
  readonly roundOrdinal?: number | undefined
}

export const TransitionGuard = Schema.Struct({
  cancelRequested: Schema.optional(Schema.Literal("absent", "present"))
})
export type TransitionGuard = { readonly cancelRequested?: "absent" | "present" }

/*
 * Outcomes: each union is a `Data.TaggedEnum` with its constructors, `$is` and `$match`
 * (`Data.taggedEnum`), so an operation builds its answer with a checked constructor. A
 * value is a `Data` struct: structurally equal to another with the same tag and fields.
 */

/** Cases without fields, one per tag. */
type Bare<Tags extends string> = { readonly [Tag in Tags]: {} }

export type RequestCancelOutcome = Data.TaggedEnum<
  & {
    readonly CancelRequested: { readonly requestedAtMs: number }
    readonly AlreadyRequested: { readonly requestedAtMs: number }
    readonly Terminal: { readonly status: TerminalRunStatus }
  }
  & Bare<"NotFound">
>
export const RequestCancelOutcome = Data.taggedEnum<RequestCancelOutcome>()

/** The loss classification shared by the claim family. */
type ClaimLossCases = Bare<"NotFound" | "AlreadyClaimed" | "HeartbeatFresh" | "SnapshotChanged">
export type ClaimLoss = Data.TaggedEnum<ClaimLossCases>
export const ClaimLoss = Data.taggedEnum<ClaimLoss>()

type ClaimCases = ClaimLossCases & { readonly Claimed: { readonly claimedAtMs: number } }
export type ClaimOutcome = Data.TaggedEnum<ClaimCases>
export const ClaimOutcome = Data.taggedEnum<ClaimOutcome>()

export type StealOutcome = Data.TaggedEnum<ClaimCases & Bare<"LivenessUnconfirmed">>
export const StealOutcome = Data.taggedEnum<StealOutcome>()

export type ClaimAndOwnOutcome = Data.TaggedEnum<ClaimLossCases & Bare<"Activated" | "EvidenceRequired">>
export const ClaimAndOwnOutcome = Data.taggedEnum<ClaimAndOwnOutcome>()

/**
 * One run of `claimAndOwnMany`: a run without owner or claim, expected in `expectedStatus` with
 * `expectedState` as its `state_json` (the claim is a compare-and-swap on both), and its new state.
 */
export interface ReleasedClaim {
  readonly runId: string
  readonly expectedStatus: "pending" | "suspended"
  readonly expectedState: string
  readonly stateJson: string
}
export type ClaimAndOwnManyOutcome = Data.TaggedEnum<Bare<"Activated" | "Missed">>
export const ClaimAndOwnManyOutcome = Data.taggedEnum<ClaimAndOwnManyOutcome>()

export type ActivateOutcome = Data.TaggedEnum<Bare<"Activated" | "ClaimLost" | "SnapshotChanged">>
export const ActivateOutcome = Data.taggedEnum<ActivateOutcome>()

export type AbandonClaimOutcome = Data.TaggedEnum<Bare<"Abandoned" | "ClaimLost">>
export const AbandonClaimOutcome = Data.taggedEnum<AbandonClaimOutcome>()

export type RecoverClaimOutcome = Data.TaggedEnum<
  Bare<"Recovered" | "NotFound" | "ClaimFresh" | "ClaimChanged" | "LivenessUnconfirmed">
>
export const RecoverClaimOutcome = Data.taggedEnum<RecoverClaimOutcome>()

export type HeartbeatOutcome = Data.TaggedEnum<
  & { readonly Updated: { readonly heartbeatAtMs: number } }
  & Bare<"FenceLost" | "NotFound">
>
export const HeartbeatOutcome = Data.taggedEnum<HeartbeatOutcome>()

/** One lease a batched heartbeat renews: the run and the owner that holds it. */
export interface RunLease {
  readonly runId: string
  readonly owner: OwnerIdType
}

export type TransitionOutcome = Data.TaggedEnum<Bare<"Transitioned" | "FenceLost" | "NotFound" | "GuardFailed">>
export const TransitionOutcome = Data.taggedEnum<TransitionOutcome>()

export const OwnershipTransition = Schema.Literal("claimed", "activated", "released", "stolen", "expired")
export type OwnershipTransition = Schema.Schema.Type<typeof OwnershipTransition>

export const companionStream = "run-store" as const
export const ownershipEventType = (transition: OwnershipTransition): string => `flows.consensus.${transition}`

/** One run for `createReleased`. */
export interface ReleasedRun {
  readonly runId: string
  readonly stateJson: string
  readonly options?: CreateOptions | undefined
}

export interface Service {
  readonly create: (runId: string, stateJson: string, options?: CreateOptions) => Effect.Effect<void, RunStoreError>
  readonly createReleased: (runs: ReadonlyArray<ReleasedRun>) => Effect.Effect<void, RunStoreError>
  readonly get: (runId: string) => Effect.Effect<RunRow, RunStoreError>
  readonly lineage: (runId: string) => Effect.Effect<ReadonlyArray<RunRow>, RunStoreError>
  readonly latestRound: (runId: string) => Effect.Effect<RunRow, RunStoreError>
  readonly requestCancel: (runId: string, nowMs: number) => Effect.Effect<RequestCancelOutcome, RunStoreError>
  readonly acknowledgeCancel: (
    runId: string,
    owner: OwnerIdType,
    nowMs: number
  ) => Effect.Effect<boolean, RunStoreError>
  readonly requestCancelLineage: (runId: string, nowMs: number) => Effect.Effect<RequestCancelOutcome, RunStoreError>
  readonly claim: (
    runId: string,
    expected: RunSnapshot,
    claimant: OwnerIdType,
    nowMs: number
  ) => Effect.Effect<ClaimOutcome, RunStoreError>
  readonly claimAndOwn: (
    runId: string,
    expected: RunSnapshot,
    owner: OwnerIdType,
    nowMs: number,
    evidence?: LivenessEvidence
  ) => Effect.Effect<ClaimAndOwnOutcome, RunStoreError>
  readonly claimAndOwnMany: (
    claims: ReadonlyArray<ReleasedClaim>,
    owner: OwnerIdType,
    nowMs: number,
    limit?: number
  ) => Effect.Effect<ReadonlyMap<string, ClaimAndOwnManyOutcome>, RunStoreError>
  readonly activate: (
    runId: string,
    claimant: OwnerIdType,
    claimedAtMs: number,
    expected: RunSnapshot
  ) => Effect.Effect<ActivateOutcome, RunStoreError>
  readonly abandonClaim: (
    runId: string,
    claimant: OwnerIdType,
    claimedAtMs: number
  ) => Effect.Effect<AbandonClaimOutcome, RunStoreError>
  readonly recoverClaim: (
    runId: string,
    staleClaimant: OwnerIdType,
    claimedAtMs: number,
    observer: OwnerIdType,
    nowMs: number,
    evidence: LivenessEvidence
  ) => Effect.Effect<RecoverClaimOutcome, RunStoreError>
  readonly heartbeat: (runId: string, owner: OwnerIdType, nowMs: number) => Effect.Effect<HeartbeatOutcome, RunStoreError>
  readonly reconfirm: (runId: string, owner: OwnerIdType, nowMs: number) => Effect.Effect<HeartbeatOutcome, RunStoreError>
  readonly heartbeatMany: (
    owner: OwnerIdType,
    runIds: ReadonlyArray<string>,
    nowMs: number
  ) => Effect.Effect<ReadonlyMap<string, HeartbeatOutcome>, RunStoreError>
  readonly heartbeatLeases: (
    leases: ReadonlyArray<RunLease>,
    nowMs: number
  ) => Effect.Effect<ReadonlyArray<HeartbeatOutcome>, RunStoreError>
  readonly transitionOwned: (
    runId: string,
    owner: OwnerIdType,
    toStatus: RunStatus,
    stateJson?: string,
    guard?: TransitionGuard
  ) => Effect.Effect<TransitionOutcome, RunStoreError>
  readonly steal: (
    runId: string,
    expected: RunSnapshot,
    claimant: OwnerIdType,
    nowMs: number,
    evidence: LivenessEvidence
  ) => Effect.Effect<StealOutcome, RunStoreError>
}
