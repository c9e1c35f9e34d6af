/**
 * The control plane's data shapes: plans, approvals, run summaries, receipts and listing requests.
 *
 * Every value is an Effect `Schema` with a same-named type, so stored JSON and admitted input are
 * decoded by one definition.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { isDurableText } from "./internal/canonical.js"

/**
 * A run identifier (`flows_runs.run_id`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunId = Schema.String
/** @since 0.1.0 @category models */
export type RunId = typeof RunId.Type

/**
 * A flow identifier from the host's catalog.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FlowId = Schema.String
/** @since 0.1.0 @category models */
export type FlowId = typeof FlowId.Type

/**
 * A caller-chosen idempotency key for a mutation (1..1024 well-formed characters, checked at admission).
 *
 * @since 0.1.0
 * @category schemas
 */
export const IdempotencyKey = Schema.String
/** @since 0.1.0 @category models */
export type IdempotencyKey = typeof IdempotencyKey.Type

/**
 * A JSON value: `null`, a boolean, a finite number, a string, an array or a record of JSON values.
 *
 * @since 0.1.0
 * @category models
 */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

/**
 * Recursive JSON value schema (finite numbers only).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Json: Schema.Schema<Json> = Schema.Union(
  Schema.Null,
  Schema.Boolean,
  Schema.Number.pipe(Schema.finite()),
  Schema.String,
  Schema.Array(Schema.suspend((): Schema.Schema<Json> => Json)),
  Schema.Record({ key: Schema.String, value: Schema.suspend((): Schema.Schema<Json> => Json) })
)

/**
 * Who asked: an identity (`id`, `kind`) stamped with the runtime's clock (`stampedAt`, epoch ms).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Principal = Schema.Struct({ id: Schema.String, kind: Schema.String, stampedAt: Schema.Number })
/** @since 0.1.0 @category models */
export type Principal = typeof Principal.Type

/**
 * Optional durable text explaining an approval decision: 1..1000 UTF-16 units, no U+0000, no unpaired
 * surrogate.
 *
 * @since 0.1.0
 * @category schemas
 */
export const DecisionReason = Schema.String.pipe(
  Schema.filter((s) => s.length >= 1 && s.length <= 1000 && isDurableText(s), {
    message: () => "must be 1 to 1000 well-formed characters"
  })
)
/** @since 0.1.0 @category models */
export type DecisionReason = typeof DecisionReason.Type

/**
 * A run budget: `tokens` (count), `milliseconds` (duration), `deadline` (ms after launch).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Budget = Schema.Struct({
  tokens: Schema.optional(Schema.Number),
  milliseconds: Schema.optional(Schema.Number),
  deadline: Schema.optional(Schema.Number)
})
/** @since 0.1.0 @category models */
export type Budget = typeof Budget.Type

/**
 * What a run may do: capabilities, reachable flows, budget and an optional host pin.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Envelope = Schema.Struct({
  capabilities: Schema.Array(Schema.String),
  flows: Schema.Array(Schema.String),
  budget: Budget,
  host: Schema.optional(Schema.String)
})
/** @since 0.1.0 @category models */
export type Envelope = typeof Envelope.Type

/**
 * How far an approval reaches: this decision only, the whole run, or remembered.
 *
 * @since 0.1.0
 * @category schemas
 */
export const GrantScope = Schema.Literal("once", "run", "remembered")
/** @since 0.1.0 @category models */
export type GrantScope = typeof GrantScope.Type

/**
 * The plan-level approval target.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PlanTarget = Schema.TaggedStruct("Plan", { planId: Schema.String, digest: Schema.String, envelope: Envelope })
/** @since 0.1.0 @category models */
export type PlanTarget = typeof PlanTarget.Type

/**
 * An in-run (node) approval target.
 *
 * @since 0.1.0
 * @category schemas
 */
export const NodeTarget = Schema.TaggedStruct("Node", {
  runId: RunId,
  requestId: Schema.String,
  digest: Schema.String,
  envelope: Envelope
})
/** @since 0.1.0 @category models */
export type NodeTarget = typeof NodeTarget.Type

/**
 * What an approval decides: a plan (`Plan`) or a gate inside a run (`Node`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ApprovalTarget = Schema.Union(PlanTarget, NodeTarget)
/** @since 0.1.0 @category models */
export type ApprovalTarget = typeof ApprovalTarget.Type

/**
 * The approval request a plan card carries.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ApprovalPayload = Schema.Struct({ target: ApprovalTarget, scope: GrantScope, idempotencyKey: IdempotencyKey })
/** @since 0.1.0 @category models */
export type ApprovalPayload = typeof ApprovalPayload.Type

/**
 * Whether a planned node is answered from a cache or runs.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PlanNodeStatus = Schema.Literal("cached", "run")
/** @since 0.1.0 @category models */
export type PlanNodeStatus = typeof PlanNodeStatus.Type

/**
 * One node of a host's persisted plan.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PlanNode = Schema.Struct({
  id: Schema.String,
  key: Schema.String,
  status: PlanNodeStatus,
  detail: Schema.optional(Json)
})
/** @since 0.1.0 @category models */
export type PlanNode = typeof PlanNode.Type

/**
 * A host's persisted plan, bound into the card digest by `planDigest`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PlanHandoff = Schema.Struct({ planDigest: Schema.String, nodes: Schema.Array(PlanNode) })
/** @since 0.1.0 @category models */
export type PlanHandoff = typeof PlanHandoff.Type

/**
 * Display-only plan edges; never part of the digest.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PlanGraph = Schema.Struct({
  edges: Schema.Array(Schema.Struct({ from: Schema.String, to: Schema.String, reason: Schema.String }))
})
/** @since 0.1.0 @category models */
export type PlanGraph = typeof PlanGraph.Type

/**
 * An immutable plan: its digest binds decoded input, envelope, deploy class, code identity and handoff.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PlanCard = Schema.Struct({
  planId: Schema.String,
  flowId: FlowId,
  digest: Schema.String,
  inputSummary: Schema.String,
  envelope: Envelope,
  deployClass: Schema.Boolean,
  executionDigest: Schema.optional(Schema.String),
  handoff: Schema.optional(PlanHandoff),
  nodes: Schema.Array(PlanNode),
  graph: Schema.optional(PlanGraph),
  approval: ApprovalPayload
})
/** @since 0.1.0 @category models */
export type PlanCard = typeof PlanCard.Type

/**
 * A plan's decision column.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PlanDecision = Schema.Literal("pending", "approved", "denied")
/** @since 0.1.0 @category models */
export type PlanDecision = typeof PlanDecision.Type

/**
 * A run's public status (mapped onto the run store's status, docs/design/control.md).
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunStatus = Schema.Literal("accepted", "running", "parked", "waiting-approval", "cancelled", "completed", "failed")
/** @since 0.1.0 @category models */
export type RunStatus = typeof RunStatus.Type

/**
 * The terminal public statuses.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isTerminalStatus = (status: RunStatus): status is "cancelled" | "completed" | "failed" =>
  status === "cancelled" || status === "completed" || status === "failed"

/**
 * How a run came to be: a spawned `child`, a time-travel `fork`, a trampoline `continuation`; absent = root.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunOrigin = Schema.Literal("child", "fork", "continuation")
/** @since 0.1.0 @category models */
export type RunOrigin = typeof RunOrigin.Type

/**
 * Who cancelled: an operator through `control`, the `engine`, or a `cascade` from an ancestor.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CancelSource = Schema.Literal("control", "engine", "cascade")
/** @since 0.1.0 @category models */
export type CancelSource = typeof CancelSource.Type

/**
 * Cancel attribution of a run.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Cancellation = Schema.Struct({
  requestedAt: Schema.Number,
  source: CancelSource,
  principal: Schema.optional(Principal),
  reason: Schema.optional(Schema.String),
  cascadedFrom: Schema.optional(RunId)
})
/** @since 0.1.0 @category models */
export type Cancellation = typeof Cancellation.Type

/**
 * An open wait (`approval` or `event`) of a run or of an attached descendant.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PendingWait = Schema.Struct({
  runId: RunId,
  flowId: Schema.optional(FlowId),
  reason: Schema.String,
  token: Schema.String,
  tokenDigest: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  attempt: Schema.optional(Schema.Number),
  request: Schema.optional(Json),
  createdAt: Schema.Number
})
/** @since 0.1.0 @category models */
export type PendingWait = typeof PendingWait.Type

/**
 * A host process: host id and pid.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunHost = Schema.Struct({ hostId: Schema.String, pid: Schema.Number })
/** @since 0.1.0 @category models */
export type RunHost = typeof RunHost.Type

/**
 * A code-drift view: recorded versus current flow digest and engine version.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CodeDriftView = Schema.Struct({
  recorded: Schema.optional(Schema.String),
  current: Schema.optional(Schema.String),
  recordedEngine: Schema.optional(Schema.String),
  currentEngine: Schema.optional(Schema.String)
})
/** @since 0.1.0 @category models */
export type CodeDriftView = typeof CodeDriftView.Type

/**
 * The control projection of one run. `ownerId` and `parkedBy` are fence JSON strings. A listed run
 * whose stored state cannot be read (a row made outside control, or a corrupt one) carries
 * `readable: false` and an `issue` naming the table, column and rule (never the stored value); its
 * other members are what the row's own columns prove (`flowId` is then `""`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunSummary = Schema.Struct({
  runId: RunId,
  flowId: FlowId,
  status: RunStatus,
  createdAt: Schema.Number,
  updatedAt: Schema.Number,
  planId: Schema.optional(Schema.String),
  planDigest: Schema.optional(Schema.String),
  executionDigest: Schema.optional(Schema.String),
  engineVersion: Schema.optional(Schema.String),
  ownerId: Schema.optional(Schema.String),
  parkedBy: Schema.optional(Schema.String),
  deadlineAt: Schema.optional(Schema.Number),
  launchedBy: Schema.optional(Schema.Struct({ id: Schema.String, kind: Schema.String })),
  parentRunId: Schema.optional(RunId),
  lineageId: Schema.optional(Schema.String),
  roundOrdinal: Schema.optional(Schema.Number),
  origin: Schema.optional(RunOrigin),
  waitingReason: Schema.optional(Schema.String),
  pendingWaits: Schema.optional(Schema.Array(PendingWait)),
  pendingResume: Schema.optional(Schema.Number),
  cancellation: Schema.optional(Cancellation),
  codeDrift: Schema.optional(CodeDriftView),
  steering: Schema.optional(Schema.Struct({ pending: Schema.Number })),
  /** A launched run's queue (since 0.2.0; read from the launch, never stored in the state). */
  queue: Schema.optional(Schema.String),
  /** Its priority in the queue, higher first (since 0.2.0). */
  priority: Schema.optional(Schema.Number),
  /** When it is (or was) available to claim, epoch ms (since 0.2.0). */
  availableAt: Schema.optional(Schema.Number),
  /** Its attempt, 1 first; a retry policy moves it on (since 0.2.0). */
  attempt: Schema.optional(Schema.Number),
  /** The retry policy's attempt bound, when the run has one (since 0.2.0). */
  maxAttempts: Schema.optional(Schema.Number),
  result: Schema.optional(Json),
  error: Schema.optional(Json),
  readable: Schema.optional(Schema.Literal(false)),
  issue: Schema.optional(Schema.String)
})
/** @since 0.1.0 @category models */
export type RunSummary = typeof RunSummary.Type

/**
 * A signal: a wait name and its JSON payload.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SignalPayload = Schema.Struct({ name: Schema.String, payload: Json })
/** @since 0.1.0 @category models */
export type SignalPayload = typeof SignalPayload.Type

/**
 * A steer message queued for a run.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SteerMessage = Schema.Struct({
  messageId: Schema.String,
  runId: RunId,
  principal: Principal,
  createdAt: Schema.Number,
  kind: Schema.optional(Schema.Literal("Message")),
  body: Schema.String
})
/** @since 0.1.0 @category models */
export type SteerMessage = typeof SteerMessage.Type

/**
 * The answer of every facade mutation.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Receipt = Schema.Union(
  Schema.TaggedStruct("Accepted", {
    receiptId: Schema.String,
    runId: Schema.optional(RunId),
    handedTo: Schema.optional(RunHost)
  }),
  Schema.TaggedStruct("AlreadyApplied", { receiptId: Schema.String, runId: Schema.optional(RunId) }),
  Schema.TaggedStruct("Parked", {
    receiptId: Schema.String,
    planId: Schema.String,
    status: Schema.Literal("waiting-approval")
  }),
  Schema.TaggedStruct("Conflict", { message: Schema.String }),
  Schema.TaggedStruct("Terminal", { runId: RunId, status: RunStatus })
)
/** @since 0.1.0 @category models */
export type Receipt = typeof Receipt.Type

/**
 * Default page size of listings.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultPageSize = 100

/**
 * Largest page size of listings.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxPageSize = 500

/**
 * A page size: an integer between 1 and 500.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PageLimit = Schema.Int.pipe(Schema.between(1, maxPageSize))
/** @since 0.1.0 @category models */
export type PageLimit = typeof PageLimit.Type

/**
 * Run listing filters of the facade's `list`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunListFilters = Schema.Struct({
  runId: Schema.optional(RunId),
  flowId: Schema.optional(FlowId),
  status: Schema.optional(RunStatus),
  terminal: Schema.optional(Schema.Boolean),
  parentRunId: Schema.optional(RunId),
  lineageId: Schema.optional(Schema.String),
  principalId: Schema.optional(Schema.String),
  since: Schema.optional(Schema.Number),
  until: Schema.optional(Schema.Number),
  /** Only launched runs of this queue (since 0.3.0). */
  queue: Schema.optional(Schema.String)
})
/** @since 0.1.0 @category models */
export type RunListFilters = typeof RunListFilters.Type

/**
 * Whether one run summary passes listing filters, as `Control.list` applies them (`since` inclusive,
 * `until` exclusive, both on `createdAt` ms; `principalId` matches `launchedBy.id`). For callers that
 * filter summaries they read one by one.
 *
 * @since 0.1.0
 * @category predicates
 */
export const matchesRunFilters = (summary: RunSummary, filters: RunListFilters): boolean =>
  (filters.flowId === undefined || summary.flowId === filters.flowId) &&
  (filters.status === undefined || summary.status === filters.status) &&
  (filters.terminal === undefined || isTerminalStatus(summary.status) === filters.terminal) &&
  (filters.parentRunId === undefined || summary.parentRunId === filters.parentRunId) &&
  (filters.lineageId === undefined || summary.lineageId === filters.lineageId) &&
  (filters.principalId === undefined || summary.launchedBy?.id === filters.principalId) &&
  (filters.since === undefined || summary.createdAt >= filters.since) &&
  (filters.until === undefined || summary.createdAt < filters.until) &&
  (filters.queue === undefined || summary.queue === filters.queue)

/**
 * A listing request of the facade: flows, plans or runs.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ListRequest = Schema.Union(
  Schema.TaggedStruct("flows", { cursor: Schema.optional(Schema.String), limit: Schema.optional(PageLimit) }),
  Schema.TaggedStruct("plans", {
    filters: Schema.optional(Schema.Struct({ flowId: Schema.optional(FlowId), decision: Schema.optional(PlanDecision) })),
    cursor: Schema.optional(Schema.String),
    limit: Schema.optional(PageLimit)
  }),
  Schema.TaggedStruct("runs", {
    filters: Schema.optional(RunListFilters),
    order: Schema.optional(Schema.Literal("newest", "oldest")),
    cursor: Schema.optional(Schema.String),
    limit: Schema.optional(PageLimit)
  })
)
/** @since 0.1.0 @category models */
export type ListRequest = typeof ListRequest.Type

/**
 * A listing page of the facade.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ListResponse = Schema.Union(
  Schema.TaggedStruct("flows", {
    items: Schema.Array(Schema.Struct({ flowId: FlowId, description: Schema.String })),
    nextCursor: Schema.optional(Schema.String)
  }),
  Schema.TaggedStruct("plans", {
    // A plan row that cannot be read is listed flagged, as runs are: its id, its decision when that
    // column reads, and the issue (table, column, rule).
    items: Schema.Array(Schema.Union(
      Schema.Struct({ card: PlanCard, input: Json, decision: PlanDecision }),
      Schema.Struct({
        planId: Schema.String,
        decision: Schema.optional(PlanDecision),
        readable: Schema.Literal(false),
        issue: Schema.String
      })
    )),
    nextCursor: Schema.optional(Schema.String)
  }),
  Schema.TaggedStruct("runs", { items: Schema.Array(RunSummary), nextCursor: Schema.optional(Schema.String) })
)
/** @since 0.1.0 @category models */
export type ListResponse = typeof ListResponse.Type
