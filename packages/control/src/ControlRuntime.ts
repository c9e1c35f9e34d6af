/**
 * The control plane's low-level port: plans, approval tokens, launches, fenced ownership, resume
 * delegation, signals, steers, listing and idempotency storage. `SqlControlRuntime` implements it over
 * SQL; `layerMemory` is that runtime over an in-memory SQLite database, for tests.
 *
 * @since 0.1.0
 */
import type { DatabaseError, DurableWriter } from "@baton/database/DurableWriter"
import type { MigrationError } from "@baton/database/Migrations"
import type * as Journal from "@baton/journal/Journal"
import type * as RunStore from "@baton/run-store/RunStore"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Fiber } from "effect"
import { Context, Effect, Layer, Schema } from "effect"
import type {
  AlreadyResolved,
  ApprovalRequired,
  ClaimLost,
  CodeDrift,
  EnvelopeMismatch,
  FlowNotFound,
  IdempotencyConflict,
  InvalidInput,
  PersistenceError,
  PlanDenied,
  PlanDigestMismatch,
  PlanNotFound,
  RunNotFound,
  Unauthorized
} from "./ControlError.js"
import type {
  ApprovalTarget,
  Budget,
  Envelope,
  FlowId,
  GrantScope,
  IdempotencyKey,
  Json,
  NodeTarget,
  PlanCard,
  PlanDecision,
  PlanGraph,
  PlanHandoff,
  Receipt,
  RunId,
  RunStatus,
  RunSummary,
  SignalPayload,
  SteerMessage
} from "./ControlSchema.js"
import { DecisionReason, Principal } from "./ControlSchema.js"

/**
 * A run owner identity (`@baton/journal` `OwnerId`): host id, pid and a per-claim nonce.
 *
 * @since 0.1.0
 * @category models
 */
export interface OwnerIdentity {
  readonly hostId: string
  readonly pid: number
  readonly nonce: string
}

/**
 * A flow the runtime can plan and launch. `executionDigest` is its code identity.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableFlow {
  readonly flowId: FlowId
  readonly description: string
  readonly deployClass: boolean
  readonly envelope: Envelope
  readonly executionDigest?: string | undefined
  readonly decode?: ((input: unknown) => Effect.Effect<unknown, InvalidInput>) | undefined
  /** `"required"`: runs start only through an approved plan; default `"none"` (`start` may create them). */
  readonly approval?: "required" | "none" | undefined
  readonly plan?:
    | ((decoded: unknown, planId: string) => Effect.Effect<{ readonly handoff: PlanHandoff; readonly graph?: PlanGraph | undefined }, InvalidInput>)
    | undefined
}

/**
 * A start's durable retry policy: at most `maxAttempts` attempts in all (1..1000); between attempts the
 * run waits `initialDelayMs · factor^(attempt-1)`, capped at `maxDelayMs`, randomized ±50 % when `jitter`.
 *
 * @since 0.2.0
 * @category models
 */
export interface RetryPolicy {
  readonly maxAttempts: number
  readonly initialDelayMs: number
  readonly factor: number
  readonly maxDelayMs: number
  readonly jitter: boolean
}

/**
 * A request to start runs of one flow without a plan decision: every input is decoded by the flow
 * first, and all runs are written in one transaction (or none). `idempotencyKeys[i]`, when given, binds
 * input `i`: the same key with the same flow and input answers the run it started; with another flow or
 * input the start fails `IdempotencyConflict`. `availableAtMs` (epoch ms) delays the runs; `hand` claims
 * them for the caller to hand to its executor at once (only when they are available now), otherwise they
 * are left released for any host's claim, ordered by `priority` (higher first), availability, creation.
 *
 * @since 0.2.0
 * @category models
 */
export interface StartRequest {
  readonly flowId: FlowId
  readonly inputs: ReadonlyArray<unknown>
  readonly idempotencyKeys?: ReadonlyArray<string | undefined> | undefined
  readonly queue: string
  readonly priority: number
  readonly availableAtMs: number
  readonly retry?: RetryPolicy | undefined
  readonly parentRunId?: RunId | undefined
  readonly principal: Principal
  readonly hand: boolean
}

/**
 * One run a start answered: `created` false when an idempotency key named an earlier run; `plan` is the
 * run's approved plan; `handed` when it was claimed for the caller to hand to its executor.
 *
 * @since 0.2.0
 * @category models
 */
export interface StartedRun {
  readonly run: RunSummary
  readonly plan: StoredPlan
  readonly created: boolean
  readonly handed: boolean
}

/**
 * A launched run's place in its queue: the queue, its attempt (1 first) and its retry policy, if any.
 * `requeue(runId, fence, attempt, availableAtMs)` moves attempt `attempt` on to the next and releases
 * the run, available again at `availableAtMs`, in one write (`ClaimLost` when the fence is spent).
 *
 * @since 0.2.0
 * @category models
 */
export interface Queueing {
  readonly queue: string
  readonly attempt: number
  readonly retry: RetryPolicy | undefined
}

/**
 * What a run's engine recorded as its end: `Completed` with the value (absent when the run returned
 * nothing) or `Failed` with the error as recorded.
 *
 * @since 0.2.0
 * @category models
 */
export type RunResult =
  | { readonly _tag: "Completed"; readonly value?: unknown }
  | { readonly _tag: "Failed"; readonly error: unknown }

/**
 * Alias of `DurableFlow` (the memory runtime's catalog entries are the SQL runtime's).
 *
 * @since 0.1.0
 * @category models
 */
export type MemoryFlow = DurableFlow

/**
 * A planning request.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanInput {
  readonly flowId: FlowId
  readonly input: unknown
  readonly idempotencyKey?: IdempotencyKey | undefined
  readonly budget?: Budget | undefined
}

/**
 * A stored plan: its card, decoded input and decision.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoredPlan {
  readonly card: PlanCard
  readonly decodedInput: unknown
  readonly decision: PlanDecision
}

/**
 * The answer of `plan`: the card, and whether this call created it.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanOutcome {
  readonly card: PlanCard
  readonly created: boolean
}

/**
 * An approval token's decision.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ApprovalDecision = Schema.Union(
  Schema.Struct({ _tag: Schema.Literal("Pending") }),
  Schema.Struct({
    _tag: Schema.Literal("Approved"),
    decisionPrincipal: Principal,
    decidedAt: Schema.NonNegativeInt,
    scope: Schema.Literal("once", "run", "remembered"),
    reason: Schema.optional(DecisionReason)
  }),
  Schema.Struct({
    _tag: Schema.Literal("Denied"),
    decisionPrincipal: Principal,
    decidedAt: Schema.NonNegativeInt,
    reason: Schema.optional(DecisionReason)
  })
)
/** @since 0.1.0 @category models */
export type ApprovalDecision = typeof ApprovalDecision.Type

/**
 * An approval token: its decision, id and the stored target.
 *
 * @since 0.1.0
 * @category models
 */
export type ApprovalToken = ApprovalDecision & { readonly tokenId: string; readonly target: ApprovalTarget }

/**
 * The token is still undecided.
 *
 * @since 0.1.0
 * @category errors
 */
export class ApprovalPending extends Schema.TaggedError<ApprovalPending>()("ApprovalPending", {
  tokenId: Schema.String
}) {}

/**
 * The token was denied (never becomes approved).
 *
 * @since 0.1.0
 * @category errors
 */
export class ApprovalDenied extends Schema.TaggedError<ApprovalDenied>()("ApprovalDenied", {
  tokenId: Schema.String,
  decisionPrincipal: Principal,
  reason: Schema.optional(DecisionReason)
}) {}

/**
 * Succeed with an approved token; fail `ApprovalPending` or `ApprovalDenied` otherwise.
 *
 * @since 0.1.0
 * @category combinators
 */
export const requireApproved = (
  token: ApprovalToken
): Effect.Effect<ApprovalToken & { readonly _tag: "Approved" }, ApprovalPending | ApprovalDenied> => {
  switch (token._tag) {
    case "Approved":
      return Effect.succeed(token)
    case "Pending":
      return Effect.fail(new ApprovalPending({ tokenId: token.tokenId }))
    case "Denied":
      return Effect.fail(
        new ApprovalDenied({
          tokenId: token.tokenId,
          decisionPrincipal: token.decisionPrincipal,
          ...(token.reason === undefined ? {} : { reason: token.reason })
        })
      )
  }
}

/**
 * A request to an approval authority (same shape as `ApprovalAuthority.Request`).
 *
 * @since 0.1.0
 * @category models
 */
export interface AuthorizationRequest {
  readonly principal: Principal
  readonly target: ApprovalTarget
  readonly decision: "approved" | "denied"
  readonly scope: GrantScope
}

/**
 * An approval authority (same shape as `ApprovalAuthority.Service`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Authority {
  readonly authorize: (request: AuthorizationRequest) => Effect.Effect<void, Unauthorized | PersistenceError>
}

/**
 * A bulk grant installed by an approval.
 *
 * @since 0.1.0
 * @category models
 */
export interface BulkGrant {
  readonly tokenId: string
  readonly envelope: Envelope
  readonly scope: GrantScope
  readonly installedAt: number
}

/**
 * The answer of `launch`: a started run, or a receipt parked on the plan's approval.
 *
 * @since 0.1.0
 * @category models
 */
export type LaunchResult =
  | { readonly _tag: "Started"; readonly receipt: Receipt; readonly run: RunSummary }
  | { readonly _tag: "Parked"; readonly receipt: Receipt }

/**
 * The answer of `claimRunKey`: this caller holds the key, or another mutation's receipt won.
 *
 * @since 0.1.0
 * @category models
 */
export type RunKeyClaim = { readonly _tag: "Claimed" } | { readonly _tag: "Raced"; readonly receipt: Receipt }

/**
 * An outstanding resume delegation. `sequence` is its `requested_seq`; `consent` a journal sequence.
 *
 * @since 0.1.0
 * @category models
 */
export interface PendingResume {
  readonly runId: RunId
  readonly sequence: number
  readonly requestedAtMs: number
  readonly consent?: number | undefined
}

/**
 * The lifecycle state of an admitted signal command.
 *
 * @since 0.1.0
 * @category models
 */
export type SignalState = "pending" | "delivered" | "rejected" | "terminal"

/**
 * An admitted signal command.
 *
 * @since 0.1.0
 * @category models
 */
export interface SignalCommand {
  readonly commandId: string
  readonly runId: RunId
  readonly signal: SignalPayload
  readonly token: string | null
  readonly state: SignalState
  readonly principal?: Principal | undefined
}

/**
 * How an executor parks a run: `reason` (1..64 chars; `approval`/`event` roll up), a wait `token` and an
 * optional JSON `request`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ParkRequest {
  readonly reason: string
  readonly token: string
  readonly request?: Json | undefined
}

/**
 * A read-only signal command query (limit 1..500, default 100).
 *
 * @since 0.1.0
 * @category models
 */
export interface SignalQuery {
  readonly runId?: RunId | undefined
  readonly name?: string | undefined
  readonly waitToken?: string | null | undefined
  readonly state?: SignalState | undefined
  readonly limit?: number | undefined
}

/**
 * A host work-discovery query; `nowMs` epoch ms, `limit` 1..500.
 *
 * @since 0.1.0
 * @category models
 */
export interface HostCandidateQuery {
  readonly flowIds?: ReadonlyArray<FlowId> | undefined
  readonly nowMs: number
  readonly limit: number
  /**
   * Queues whose released runs this host cannot take now (at its own limit for them, since 0.3.0): left
   * out of the page, so a backlog in one never hides the runs of another. Their lapsed leases still list.
   */
  readonly skipQueues?: ReadonlyArray<string> | undefined
}

/**
 * What `hostProbe` looks at: the flows a host serves (all when absent) and `nowMs`, epoch ms.
 *
 * @since 0.2.0
 * @category models
 */
export interface HostProbeQuery {
  readonly flowIds?: ReadonlyArray<FlowId> | undefined
  readonly nowMs: number
}

/**
 * Whether a host's sweep has anything to read: pending signal commands, outstanding resume delegations
 * of runs not terminal, host candidates (as `hostCandidates` would list for the same query). A `true`
 * may be gone by the time the sweep reads it; a `false` means nothing was committed at the read.
 *
 * @since 0.2.0
 * @category models
 */
export interface HostProbe {
  readonly signals: boolean
  readonly resumes: boolean
  readonly candidates: boolean
}

/**
 * A launched run a host could take up: its lease has lapsed (`stale-owner`, `orphaned-claim`), or it
 * is `released` and available by `nowMs` in a queue that is neither paused nor at its concurrency
 * limit. A page lists the lapsed leases first, then released runs by priority (highest first), then
 * availability time, then creation. `queue` is the run's queue (`"default"` unless started in another).
 *
 * @since 0.1.0
 * @category models
 */
export interface HostCandidate {
  readonly runId: RunId
  readonly flowId: FlowId
  readonly kind: "released" | "stale-owner" | "orphaned-claim"
  readonly createdSeq: number
  /** @since 0.2.0 */
  readonly queue: string
  readonly updatedAt: number
  readonly owner?: OwnerIdentity | undefined
  readonly heartbeatAtMs?: number | undefined
  readonly claim?: OwnerIdentity | undefined
  readonly claimedAtMs?: number | undefined
}

/**
 * A page of host candidates. `newestHeartbeatAtMs` (the newest lease stamp of the asked flows' running
 * runs, for a host to notice its clock is behind) is read only for a page that lists candidates.
 *
 * @since 0.1.0
 * @category models
 */
export interface HostCandidatePage {
  readonly candidates: ReadonlyArray<HostCandidate>
  readonly newestHeartbeatAtMs?: number | undefined
}

/**
 * What `claimNext` takes: the flows a host serves, `nowMs` (epoch ms), at most `limit` runs (1..100), and
 * queues whose runs it must leave to the one-at-a-time path (`exceptQueues`: queues with this host's own
 * limit): a batch ends at the first such run.
 *
 * @since 0.3.0
 * @category models
 */
export interface ClaimNextQuery {
  readonly flowIds: ReadonlyArray<FlowId>
  readonly nowMs: number
  readonly limit: number
  readonly exceptQueues?: ReadonlyArray<string> | undefined
  /** Queues whose runs are left out entirely (this host is at its own limit for them; since 0.3.0). */
  readonly skipQueues?: ReadonlyArray<string> | undefined
}

/**
 * A run `claimNext` claimed for this runtime: its summary as claimed (`accepted`, owned by `fence`), its
 * queue, the lease stamp the claim wrote (`heartbeatAtMs`, epoch ms), its plan when it has one and it
 * decoded, and `neverDriven`: its journal holds only control's own entries (`control.*`) and it has no
 * attempt, so no earlier drive, takeover or step of it exists to read.
 *
 * @since 0.3.0
 * @category models
 */
export interface ClaimedRun {
  readonly summary: RunSummary
  readonly queue: string
  readonly fence: string
  readonly heartbeatAtMs: number
  readonly neverDriven: boolean
  readonly plan?: StoredPlan | undefined
}

/**
 * What `claimNext` did: the runs it claimed, in claim order. It claims nothing while lapsed leases of the
 * served flows wait (`leasesWaiting`: a host takes those up first, through `hostCandidates`), nor when
 * the newest lease stamp of the served flows leads `nowMs` by more than the skew allowance (this host's
 * clock is behind; `newestHeartbeatAtMs` says by how much).
 *
 * @since 0.3.0
 * @category models
 */
export interface ClaimNextResult {
  readonly claimed: ReadonlyArray<ClaimedRun>
  readonly leasesWaiting: boolean
  readonly newestHeartbeatAtMs?: number | undefined
}

/**
 * A keyset cursor of the runs listing: the last returned `row_seq` and run id. `queryRuns` checks it
 * against the rows (one primary-key lookup): a cursor naming no run, or a run at another `row_seq`, is
 * forged (or its run was deleted since) and fails `InvalidInput`.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunCursor {
  readonly rowSeq: number
  readonly runId: RunId
}

/**
 * Filters of `queryRuns`, evaluated in SQL.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunFilters {
  readonly flowId?: FlowId | undefined
  readonly status?: RunStatus | undefined
  readonly terminal?: boolean | undefined
  readonly parentRunId?: RunId | undefined
  readonly lineageId?: string | undefined
  readonly since?: number | undefined
  readonly until?: number | undefined
  readonly launchedBy?: { readonly id: string; readonly kind?: string | undefined } | undefined
  readonly runIds?: ReadonlyArray<RunId> | undefined
  /** Only launched runs of this queue (since 0.3.0). */
  readonly queue?: string | undefined
}

/**
 * A runs listing request (limit 1..500).
 *
 * @since 0.1.0
 * @category models
 */
export interface RunQuery {
  readonly filters?: RunFilters | undefined
  readonly order?: "newest" | "oldest" | undefined
  readonly cursor?: RunCursor | undefined
  readonly limit: number
}

/**
 * A runs listing page; `nextCursor` is present iff more rows follow.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunPage {
  readonly items: ReadonlyArray<RunSummary>
  readonly nextCursor?: RunCursor | undefined
}

/**
 * An id inventory request: `after`/`through` are row sequences, `limit` 1..500.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdPageRequest {
  readonly after?: number | undefined
  readonly through?: number | undefined
  readonly limit: number
}

/**
 * An id inventory page; `through` is pinned on the first page, `next` present when more follow.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdPage {
  readonly ids: ReadonlyArray<string>
  readonly next?: number | undefined
  readonly through: number
}

/**
 * A plan listing query (limit 1..500). `after` is a `next` a page answered: a plan `row_seq`; one naming
 * no plan row fails `InvalidInput` (plans are never deleted, so it was forged).
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanQuery {
  readonly flowId?: FlowId | undefined
  readonly decision?: PlanDecision | undefined
  readonly after?: number | undefined
  readonly limit: number
}

/**
 * A listed plan whose stored row cannot be read: its id, its decision when that column reads, and an
 * `issue` naming the table, column and rule (never the stored value).
 *
 * @since 0.1.0
 * @category models
 */
export interface UnreadablePlan {
  readonly planId: string
  readonly decision?: PlanDecision | undefined
  readonly readable: false
  readonly issue: string
}

/**
 * A plan listing page. One unreadable row is listed as an `UnreadablePlan` instead of failing the page.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanPage {
  readonly plans: ReadonlyArray<StoredPlan | UnreadablePlan>
  readonly next?: number | undefined
}

/**
 * Which runs `resume` may claim: only control launches (`launched`) or any run (`any`).
 *
 * @since 0.1.0
 * @category models
 */
export type ResumeScope = "launched" | "any"

/**
 * Errors of fenced run operations.
 *
 * @since 0.1.0
 * @category models
 */
export type OwnershipError = RunNotFound | ClaimLost | PersistenceError

/**
 * The low-level control port. Every durable failure that is not a declared domain error is a
 * `PersistenceError` naming the step. What a call stores is admitted first — plan input and budget,
 * steer messages, signal payloads and principals, park requests, ids of steers and signals: a value
 * both dialects cannot store (U+0000, an unpaired surrogate, a non-finite number) or that does not
 * decode fails `InvalidInput` naming the field and the rule, and nothing is written. A stored value
 * that does not decode fails `PersistenceError` with operation `decode <table.column>` and a message
 * naming the row's key, the member path and the rule, never the value; `queryRuns` instead lists such
 * a run (and a foreign one, whose state is neither a control summary nor engine state) flagged
 * `readable: false` with that `issue`, and `getRun` answers a foreign run the same way. A run's status
 * is its row's when its stored summary is out of step (a run settled through the run store).
 *
 * `appendPrepared` (optional, since 0.2.0): appends journal entries prepared by `Journal.prepareAppend`
 * (one run each) inside the caller's write, as few statements as the database allows (PostgreSQL: one
 * per 500 runs; SQLite: each its own `append`); a runtime without it leaves the caller to append each.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly appendPrepared?:
    | ((appends: ReadonlyArray<Journal.PreparedAppend>) => Effect.Effect<void, Journal.JournalError | PersistenceError>)
    | undefined
  readonly authorizeApproval: (request: AuthorizationRequest) => Effect.Effect<void, Unauthorized | PersistenceError>
  readonly plan: (input: PlanInput) => Effect.Effect<PlanOutcome, FlowNotFound | InvalidInput | PersistenceError>
  readonly getPlan: (planId: string) => Effect.Effect<StoredPlan, PlanNotFound | PersistenceError>
  readonly pagePlanIds: (request: IdPageRequest) => Effect.Effect<IdPage, InvalidInput | PersistenceError>
  readonly queryPlans: (query: PlanQuery) => Effect.Effect<PlanPage, InvalidInput | PersistenceError>
  readonly lookupApproval: (
    target: ApprovalTarget
  ) => Effect.Effect<
    ApprovalToken,
    PlanDigestMismatch | EnvelopeMismatch | AlreadyResolved | PlanNotFound | RunNotFound | PersistenceError
  >
  readonly registerApproval: (
    target: NodeTarget
  ) => Effect.Effect<ApprovalToken, RunNotFound | PlanDigestMismatch | EnvelopeMismatch | PersistenceError>
  readonly installBulkGrant: (token: ApprovalToken, envelope: Envelope, scope: GrantScope) => Effect.Effect<void, PersistenceError>
  readonly resolveApproval: (
    token: ApprovalToken,
    decision: "approved" | "denied",
    principal: Principal,
    scope?: GrantScope,
    reason?: string
  ) => Effect.Effect<void, AlreadyResolved | Unauthorized | InvalidInput | PersistenceError>
  readonly launch: (
    planId: string,
    digest: string,
    envelope: Envelope,
    principal?: Principal,
    reservedRunId?: RunId
  ) => Effect.Effect<
    LaunchResult,
    PlanNotFound | PlanDenied | PlanDigestMismatch | EnvelopeMismatch | ClaimLost | PersistenceError
  >
  readonly start: (
    request: StartRequest
  ) => Effect.Effect<ReadonlyArray<StartedRun>, FlowNotFound | InvalidInput | IdempotencyConflict | ApprovalRequired | ClaimLost | PersistenceError>
  readonly getRun: (runId: RunId) => Effect.Effect<RunSummary, RunNotFound | PersistenceError>
  readonly runResult: (runId: RunId) => Effect.Effect<RunResult | undefined, PersistenceError>
  readonly queueing: (runId: RunId) => Effect.Effect<Queueing | undefined, PersistenceError>
  readonly requeue: (
    runId: RunId,
    fence: string,
    attempt: number,
    availableAtMs: number
  ) => Effect.Effect<RunSummary, OwnershipError>
  readonly pageRunIds: (request: IdPageRequest) => Effect.Effect<IdPage, InvalidInput | PersistenceError>
  readonly queryRuns: (query: RunQuery) => Effect.Effect<RunPage, InvalidInput | PersistenceError>
  readonly hostCandidates: (query: HostCandidateQuery) => Effect.Effect<HostCandidatePage, InvalidInput | PersistenceError>
  /**
   * Claim up to `limit` next released runs of the served flows, by priority (highest first), then
   * availability, then creation (runs available by `nowMs`, in queues not paused and not running their
   * global limit, whose recorded code is this runtime's): the leading ones, up to the first whose queue
   * has a limit to check (a global one, or one listed in `exceptQueues`). That run, those after it,
   * drifted runs and lapsed leases are left to `hostCandidates` and `resume`, so the order holds. SQL: one read of
   * twice the runs wanted, then the run store's `claimAndOwnMany` (a compare-and-swap per run; on
   * PostgreSQL one autocommit statement that skips rows another claimer holds, so hosts claiming at once
   * take different runs); nothing to claim writes nothing. Bad input fails `InvalidInput` naming the field.
   * @since 0.3.0
   */
  readonly claimNext: (query: ClaimNextQuery) => Effect.Effect<ClaimNextResult, InvalidInput | PersistenceError>
  /** One read (one statement on SQL) of whether a sweep has work: an idle host's tick is this alone. @since 0.2.0 */
  readonly hostProbe: (query: HostProbeQuery) => Effect.Effect<HostProbe, InvalidInput | PersistenceError>
  readonly listFlows: Effect.Effect<ReadonlyArray<{ readonly flowId: FlowId; readonly description: string }>, PersistenceError>
  readonly deliverSignal: (runId: RunId, signal: SignalPayload) => Effect.Effect<void, RunNotFound | InvalidInput | PersistenceError>
  readonly admitSignal: (
    commandId: string,
    runId: RunId,
    signal: SignalPayload,
    principal?: Principal
  ) => Effect.Effect<void, RunNotFound | InvalidInput | PersistenceError>
  readonly signalCommand: (commandId: string) => Effect.Effect<SignalCommand | undefined, PersistenceError>
  readonly pendingSignals: Effect.Effect<ReadonlyArray<SignalCommand>, PersistenceError>
  readonly signalCommands: (query: SignalQuery) => Effect.Effect<ReadonlyArray<SignalCommand>, InvalidInput | PersistenceError>
  readonly bindSignal: (commandId: string, token: string) => Effect.Effect<string | null, PersistenceError>
  readonly settleSignal: (commandId: string, state: "delivered" | "rejected" | "terminal") => Effect.Effect<void, PersistenceError>
  readonly deliveredSignals: (runId: RunId) => Effect.Effect<ReadonlyArray<SignalPayload>, RunNotFound | PersistenceError>
  readonly appendSteer: (runId: RunId, message: SteerMessage) => Effect.Effect<number, RunNotFound | InvalidInput | PersistenceError>
  readonly steers: (
    runId: RunId,
    after?: number
  ) => Effect.Effect<ReadonlyArray<{ readonly seq: number; readonly message: SteerMessage }>, RunNotFound | PersistenceError>
  readonly requestResume: (
    runId: RunId,
    options?: { readonly consent?: number | undefined }
  ) => Effect.Effect<number, RunNotFound | InvalidInput | PersistenceError>
  readonly pendingResumes: Effect.Effect<ReadonlyArray<PendingResume>, PersistenceError>
  readonly clearResume: (runId: RunId, sequence: number) => Effect.Effect<void, PersistenceError>
  readonly registerFiber: (runId: RunId, fiber: Fiber.RuntimeFiber<unknown, unknown>) => Effect.Effect<void, RunNotFound | PersistenceError>
  readonly interrupt: (
    runId: RunId,
    settle?: (effect: Effect.Effect<RunSummary, OwnershipError>) => Effect.Effect<RunSummary, OwnershipError>
  ) => Effect.Effect<RunSummary, OwnershipError>
  readonly codeDrift: (runId: RunId) => Effect.Effect<CodeDrift | undefined, RunNotFound | PersistenceError>
  /**
   * `codeDrift` of many runs at once, from their summaries as `getRun` or `queryRuns` answered them:
   * a summary that records its code (`executionDigest` or `engineVersion`) needs no read, and the
   * lineage of those that do not is read in one statement. Answers the runs that drift, by run id; a
   * run whose drift cannot be read (its row gone, a stored value that does not decode, a failing pin
   * hook) is left out. Fails `PersistenceError` only when the flow catalog cannot be read.
   *
   * @since 0.2.0
   */
  readonly codeDrifts: (runs: ReadonlyArray<RunSummary>) => Effect.Effect<ReadonlyMap<RunId, CodeDrift>, PersistenceError>
  readonly recordedCode: (
    runId: RunId
  ) => Effect.Effect<{ readonly executionDigest?: string | undefined; readonly engineVersion?: string | undefined }, RunNotFound | PersistenceError>
  readonly resume: (runId: RunId, options?: { readonly scope?: ResumeScope | undefined }) => Effect.Effect<RunSummary, OwnershipError>
  readonly resumeAdopting: (
    runId: RunId,
    options?: { readonly scope?: ResumeScope | undefined }
  ) => Effect.Effect<RunSummary, OwnershipError | CodeDrift>
  readonly claimFence: (runId: RunId) => Effect.Effect<string, OwnershipError>
  readonly releasePending: (runId: RunId, fence: string) => Effect.Effect<RunSummary, OwnershipError>
  readonly park: (runId: RunId, fence: string, wait: ParkRequest) => Effect.Effect<RunSummary, OwnershipError | InvalidInput>
  readonly writeStatus: (runId: RunId, fence: string, status: RunStatus) => Effect.Effect<RunSummary, OwnershipError>
  readonly stampPrincipal: (submitted?: { readonly id: string; readonly kind: string }) => Effect.Effect<Principal, PersistenceError>
  readonly lookupMutation: (key: string, fingerprint: string) => Effect.Effect<Receipt | undefined, PersistenceError>
  readonly recordMutation: (key: string, fingerprint: string, receipt: Receipt) => Effect.Effect<void, PersistenceError>
  readonly claimRunKey: (key: string, fingerprint: string) => Effect.Effect<RunKeyClaim, InvalidInput | PersistenceError>
  readonly releaseRunKey: (key: string) => Effect.Effect<void, PersistenceError>
  readonly grants: Effect.Effect<ReadonlyArray<BulkGrant>, PersistenceError>
}

/**
 * The control runtime service tag.
 *
 * @since 0.1.0
 * @category services
 */
export class ControlRuntime extends Context.Tag("@baton/control/ControlRuntime")<ControlRuntime, Service>() {}

/**
 * Build a service from an implementation (identity; a seam for adapters).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (impl: Service): Service => impl

/**
 * Options of the memory runtime: catalog, clock override, default principal and authority, each
 * passed to `SqlControlRuntime`. `now` (epoch milliseconds) is the SQL runtime's `now`: every
 * operation of the runtime reads it instead of Effect's `Clock`; absent, the runtime reads `Clock`
 * (tests drive it with `TestClock`). `principal` defaults to `{ id: "local", kind: "operator" }` and
 * `approvalAuthority` to `ApprovalAuthority.local`, as for the SQL runtime.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryOptions {
  readonly flows?: ReadonlyArray<DurableFlow> | undefined
  readonly now?: (() => number) | undefined
  readonly principal?: { readonly id: string; readonly kind: string } | undefined
  readonly approvalAuthority?: Authority | undefined
}

/**
 * What `layerMemory` provides: the runtime, the journal it reads cancel evidence from, the run store
 * and the database's client and writer (for raw-SQL tests).
 *
 * @since 0.3.0
 * @category models
 */
export type MemoryServices =
  | ControlRuntime
  | Journal.Journal
  | RunStore.RunStore
  | SqlClient.SqlClient
  | DurableWriter

/**
 * How building `layerMemory` fails: a migration, the database, the journal or the runtime's options.
 *
 * @since 0.3.0
 * @category models
 */
export type MemoryError = MigrationError | DatabaseError | Journal.JournalError | PersistenceError

/**
 * `SqlControlRuntime` over a fresh in-memory SQLite database (Node only): the production runtime, so
 * queue order, delays, retries, limits and pauses, fences, lineage and cancel attribution (cascades
 * included) are exactly SQL's. Each build is an empty database migrated with the journal's, the run
 * store's and control's sets; nothing survives the layer's scope. The layer also provides that
 * database's `Journal` (the one whose entries `getRun` and `queryRuns` attribute cancellations from;
 * give it to `Control.layer`), `RunStore`, `SqlClient` and `DurableWriter`. Building fails with a
 * migration's, the database's, the journal's or the runtime's error (`MemoryError`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (options: MemoryOptions = {}): Layer.Layer<MemoryServices, MemoryError> =>
  // Loaded when built, so importing this module never loads the SQLite driver.
  Layer.unwrapEffect(Effect.map(Effect.promise(() => import("./internal/sqliteMemory.js")), (stack) => stack.layer(options)))
