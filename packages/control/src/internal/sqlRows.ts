/**
 * Reading `flows_runs` rows (with the launch index and delegation) and decoding their summaries.
 */
import type { Fragment } from "@effect/sql/Statement"
import { Effect, Either, Option, Schema } from "effect"
import type { PersistenceError } from "../ControlError.js"
import { RunNotFound } from "../ControlError.js"
import type { RunStatus, RunSummary } from "../ControlSchema.js"
import { isTerminalStatus, RunSummary as RunSummarySchema } from "../ControlSchema.js"
import type { OwnerIdentity } from "../ControlRuntime.js"
import type { SqlContext } from "./sqlContext.js"
import { persist } from "./sqlContext.js"
import { corrupt, decoder } from "./storedValue.js"

/** The run store's status values. */
export type StoreStatus = "pending" | "running" | "suspended" | "completed" | "failed" | "cancelled"

/** A decoded run row: the store's columns control reads plus its launch index and delegation. */
export interface RunRow {
  readonly rowSeq: number
  readonly runId: string
  readonly status: StoreStatus
  readonly createdAtMs: number
  readonly startedAtMs: number | null
  readonly finishedAtMs: number | null
  readonly owner: OwnerIdentity | null
  readonly heartbeatAtMs: number | null
  readonly claim: OwnerIdentity | null
  readonly claimedAtMs: number | null
  readonly parentRunId: string | null
  readonly lineageId: string | null
  readonly roundOrdinal: number | null
  readonly cancelRequestedAtMs: number | null
  readonly waitingReason: string | null
  readonly waitingToken: string | null
  readonly waitingRequest: string | null
  readonly stateJson: string
  readonly launched: boolean
  readonly createdSeq: number | null
  readonly principal: { readonly id: string; readonly kind: string } | undefined
  readonly pendingResume: number | null
  /** The launch's queue placement (`null` before launch): queue, priority, availability, attempt, retry. */
  readonly queueing: QueueColumns | null
}

const RetryPolicySchema = Schema.Struct({
  maxAttempts: Schema.Int,
  initialDelayMs: Schema.Int,
  factor: Schema.Number,
  maxDelayMs: Schema.Int,
  jitter: Schema.Boolean
})

/** A stored `retry_json`, or none when it no longer reads (such a run fails rather than retrying blind). */
export const decodeRetry = Schema.decodeUnknownOption(Schema.parseJson(RetryPolicySchema))

/** A launched run's queue columns as stored (`retryJson` is the start's retry policy, JSON). */
export interface QueueColumns {
  readonly queue: string
  readonly priority: number
  readonly availableAtMs: number
  readonly attempt: number
  readonly retryJson: string | null
}

/** Raw selected columns. */
export type RawRow = Record<string, unknown>

/** Each column every run read selects: its expression over `r`, `cr`, `rr` and the name it answers as. */
const runColumnList: ReadonlyArray<readonly [expression: string, name: string]> = [
  ...[
    "row_seq", "run_id", "status", "created_at_ms", "started_at_ms", "finished_at_ms",
    "owner_host_id", "owner_pid", "owner_nonce", "heartbeat_at_ms",
    "claim_host_id", "claim_pid", "claim_nonce", "claimed_at_ms",
    "parent_run_id", "lineage_id", "round_ordinal", "cancel_requested_at_ms",
    "waiting_reason", "waiting_token", "waiting_request", "state_json"
  ].map((name) => [`r.${name}`, name] as const),
  ["cr.run_id", "launch_run_id"],
  ["cr.created_seq", "created_seq"],
  ["cr.principal_id", "principal_id"],
  ["cr.principal_kind", "principal_kind"],
  ["rr.requested_seq", "requested_seq"],
  ["cr.queue", "queue"],
  ["cr.priority", "priority"],
  ["cr.available_at_ms", "available_at_ms"],
  ["cr.attempt", "attempt"],
  ["cr.retry_json", "retry_json"]
]

/** The names `runColumns` answers, in order (what `toRow` reads). */
export const runColumnNames: ReadonlyArray<string> = runColumnList.map(([, name]) => name)

const runColumnText = runColumnList
  .map(([expression, name]) => (expression.endsWith(`.${name}`) ? expression : `${expression} AS ${name}`))
  .join(", ")

/** The column list every run read selects (aliases `r`, `cr`, `rr`). */
export const runColumns = (ctx: SqlContext): Fragment => ctx.sql.literal(runColumnText)

/** The FROM clause matching `runColumns`. */
export const runFrom = (ctx: SqlContext): Fragment =>
  ctx.sql`flows_runs r LEFT JOIN control_runs cr ON cr.run_id = r.run_id
    LEFT JOIN control_run_resumes rr ON rr.run_id = r.run_id`

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))
const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v))

/** Decode one raw row (integers may arrive as decimal strings on foreign clients). */
export const toRow = (raw: RawRow): RunRow => toRowFromValues(runColumnNames.map((name) => raw[name]))

// Each column's position in `runColumnNames`, read by index (a page decodes many rows).
const at = (name: string): number => {
  const i = runColumnNames.indexOf(name)
  if (i < 0) throw new Error(`${name} is not a run column`)
  return i
}
const rowSeqAt = at("row_seq")
const runIdAt = at("run_id")
const statusAt = at("status")
const createdAtAt = at("created_at_ms")
const startedAtAt = at("started_at_ms")
const finishedAtAt = at("finished_at_ms")
const ownerHostAt = at("owner_host_id")
const ownerPidAt = at("owner_pid")
const ownerNonceAt = at("owner_nonce")
const heartbeatAt = at("heartbeat_at_ms")
const claimHostAt = at("claim_host_id")
const claimPidAt = at("claim_pid")
const claimNonceAt = at("claim_nonce")
const claimedAtAt = at("claimed_at_ms")
const parentAt = at("parent_run_id")
const lineageAt = at("lineage_id")
const roundAt = at("round_ordinal")
const cancelAt = at("cancel_requested_at_ms")
const waitingReasonAt = at("waiting_reason")
const waitingTokenAt = at("waiting_token")
const waitingRequestAt = at("waiting_request")
const stateAt = at("state_json")
const launchAt = at("launch_run_id")
const createdSeqAt = at("created_seq")
const principalIdAt = at("principal_id")
const principalKindAt = at("principal_kind")
const requestedSeqAt = at("requested_seq")
const queueAt = at("queue")
const priorityAt = at("priority")
const availableAtAt = at("available_at_ms")
const attemptAt = at("attempt")
const retryAt = at("retry_json")

/** Decode one row answered as an array of values in `runColumnNames` order. */
export const toRowFromValues = (values: ReadonlyArray<unknown>): RunRow => {
  const ownerHost = str(values[ownerHostAt])
  const claimHost = str(values[claimHostAt])
  const principalId = str(values[principalIdAt])
  const launch = values[launchAt]
  return {
    rowSeq: Number(values[rowSeqAt]),
    runId: String(values[runIdAt]),
    status: String(values[statusAt]) as StoreStatus,
    createdAtMs: Number(values[createdAtAt]),
    startedAtMs: num(values[startedAtAt]),
    finishedAtMs: num(values[finishedAtAt]),
    owner: ownerHost === null
      ? null
      : { hostId: ownerHost, pid: Number(values[ownerPidAt]), nonce: String(values[ownerNonceAt]) },
    heartbeatAtMs: num(values[heartbeatAt]),
    claim: claimHost === null
      ? null
      : { hostId: claimHost, pid: Number(values[claimPidAt]), nonce: String(values[claimNonceAt]) },
    claimedAtMs: num(values[claimedAtAt]),
    parentRunId: str(values[parentAt]),
    lineageId: str(values[lineageAt]),
    roundOrdinal: num(values[roundAt]),
    cancelRequestedAtMs: num(values[cancelAt]),
    waitingReason: str(values[waitingReasonAt]),
    waitingToken: str(values[waitingTokenAt]),
    waitingRequest: str(values[waitingRequestAt]),
    stateJson: String(values[stateAt]),
    launched: launch !== null && launch !== undefined,
    createdSeq: num(values[createdSeqAt]),
    principal: principalId === null ? undefined : { id: principalId, kind: String(values[principalKindAt] ?? "") },
    pendingResume: num(values[requestedSeqAt]),
    queueing: values[queueAt] === null || values[queueAt] === undefined
      ? null
      : {
        queue: String(values[queueAt]),
        priority: Number(values[priorityAt]),
        availableAtMs: Number(values[availableAtAt]),
        attempt: Number(values[attemptAt]),
        retryJson: str(values[retryAt])
      }
  }
}

/** Read one run row, or `undefined`. */
export const readRow = (ctx: SqlContext, runId: string): Effect.Effect<RunRow | undefined, PersistenceError> =>
  ctx.sql<RawRow>`SELECT ${runColumns(ctx)} FROM ${runFrom(ctx)} WHERE r.run_id = ${runId}`.pipe(
    Effect.map((rows) => (rows[0] === undefined ? undefined : toRow(rows[0]))),
    persist("read a run")
  )

/** Read one run row or fail `RunNotFound`. */
export const requireRow = (ctx: SqlContext, runId: string): Effect.Effect<RunRow, RunNotFound | PersistenceError> =>
  Effect.flatMap(readRow(ctx, runId), (row) => (row === undefined ? Effect.fail(new RunNotFound({ runId })) : Effect.succeed(row)))

/** Whether a run row exists. */
export const runExists = (ctx: SqlContext, runId: string): Effect.Effect<void, RunNotFound | PersistenceError> =>
  ctx.sql<{ run_id: string }>`SELECT run_id FROM flows_runs WHERE run_id = ${runId}`.pipe(
    persist("read a run"),
    Effect.flatMap((rows) => (rows.length === 0 ? Effect.fail(new RunNotFound({ runId })) : Effect.void))
  )

/** The control status the store can prove for a foreign row. */
export const reverseStatus = (status: StoreStatus): RunStatus =>
  status === "pending" ? "accepted" : status === "suspended" ? "parked" : status

/** The store status a control status is written as. */
export const storeStatusOf = (status: RunStatus): StoreStatus =>
  status === "accepted" || status === "running"
    ? "running"
    : status === "parked" || status === "waiting-approval"
    ? "suspended"
    : status

const decodeSummary = decoder(RunSummarySchema, "flows_runs.state_json")
const EngineState = Schema.Struct({ flowName: Schema.String.pipe(Schema.minLength(1)) })
const decodeEngine = decoder(EngineState, "flows_runs.state_json")

/** True when a parsed state object is a control summary (any of `runId`, `flowId`, `status`). */
export const isControlState = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) &&
  ("runId" in value || "flowId" in value || "status" in value)

/**
 * What a row's `state_json` reads as: a summary; `Foreign` (JSON that is neither a control summary nor
 * engine state, e.g. a row made with the run store's own `create`: there is nothing wrong to report, only
 * nothing to read); or `Corrupt` (a control summary or engine state with a bad member, or not JSON).
 */
export type StateReading =
  | { readonly _tag: "Summary"; readonly summary: RunSummary }
  | { readonly _tag: "Foreign"; readonly issue: string }
  | { readonly _tag: "Corrupt"; readonly error: PersistenceError }

/** A terminal status on either side must agree with the other; non-terminal statuses refine each other. */
const inStep = (summary: RunStatus, row: StoreStatus) =>
  isTerminalStore(row) || isTerminalStatus(summary) ? summary === row : true

/**
 * The row's status wins over its summary's: an owner that settled the row through the run store
 * (`transitionOwned`) leaves the summary behind, so an out-of-step summary is reported with the
 * status the row proves.
 */
const inStepWithRow = (row: RunRow, summary: RunSummary): RunSummary => {
  if (inStep(summary.status, row.status)) return summary
  const { ownerId: _o, parkedBy: _p, ...rest } = summary
  const status = reverseStatus(row.status)
  return {
    ...(isTerminalStatus(status) ? rest : summary),
    status,
    updatedAt: Math.max(summary.updatedAt, row.finishedAtMs ?? row.startedAtMs ?? row.createdAtMs)
  }
}

/** Read a row's `state_json` (see `StateReading`). */
export const readState = (row: RunRow): StateReading => {
  const subject = `run ${row.runId}`
  let parsed: unknown
  try {
    parsed = JSON.parse(row.stateJson)
  } catch {
    return { _tag: "Corrupt", error: corrupt("flows_runs.state_json", subject, "is not JSON") }
  }
  if (isControlState(parsed)) {
    const decoded = decodeSummary(parsed, subject)
    return Either.isRight(decoded)
      ? { _tag: "Summary", summary: inStepWithRow(row, decoded.right) }
      : { _tag: "Corrupt", error: decoded.left }
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || !("flowName" in parsed)) {
    return { _tag: "Foreign", issue: "flows_runs.state_json: holds neither a control summary nor engine state (no flowName)" }
  }
  const engine = decodeEngine(parsed, subject)
  if (Either.isLeft(engine)) return { _tag: "Corrupt", error: engine.left }
  return {
    _tag: "Summary",
    summary: {
      runId: row.runId,
      flowId: engine.right.flowName,
      status: reverseStatus(row.status),
      createdAt: row.createdAtMs,
      updatedAt: row.finishedAtMs ?? row.startedAtMs ?? row.createdAtMs
    }
  }
}

/**
 * What a listing shows for a row whose state cannot be read: the row's own columns, flagged
 * `readable: false` with the `issue` (table, column and rule; never the stored value).
 */
export const unreadableSummary = (row: RunRow, issue: string): RunSummary => ({
  runId: row.runId,
  flowId: "",
  status: reverseStatus(row.status),
  createdAt: row.createdAtMs,
  updatedAt: row.finishedAtMs ?? row.startedAtMs ?? row.createdAtMs,
  readable: false,
  issue
})

/** Decode a row's `state_json` into its base summary; a foreign or corrupt state fails `PersistenceError`. */
export const baseSummary = (row: RunRow): Effect.Effect<RunSummary, PersistenceError> => {
  const reading = readState(row)
  switch (reading._tag) {
    case "Summary":
      return Effect.succeed(reading.summary)
    case "Foreign":
      return Effect.fail(corrupt("flows_runs.state_json", `run ${row.runId}`, "holds neither a control summary nor engine state (no flowName)"))
    case "Corrupt":
      return Effect.fail(reading.error)
  }
}

/** The base summary plus `launchedBy` (from the launch index, which outlives an engine rewrite). */
export const summaryOf = (row: RunRow): Effect.Effect<RunSummary, PersistenceError> =>
  Effect.map(baseSummary(row), (summary) => withLaunchedBy(row, summary))

/** `summary` plus the row's `launchedBy`, when its launch index names one, and its queue placement. */
export const withLaunchedBy = (row: RunRow, summary: RunSummary): RunSummary => {
  const placed = queueMembers(row)
  if (row.principal === undefined && placed === undefined) return summary
  return { ...summary, ...(row.principal === undefined ? {} : { launchedBy: row.principal }), ...placed }
}

/** A launched run's queue members of its summary (derived from the launch, never stored in the state). */
export const queueMembers = (
  row: RunRow
): Pick<RunSummary, "queue" | "priority" | "availableAt" | "attempt" | "maxAttempts"> | undefined => {
  const q = row.queueing
  if (q === null) return undefined
  const retry = q.retryJson === null ? undefined : Option.getOrUndefined(decodeRetry(q.retryJson))
  return placement(q.queue, q.priority, q.availableAtMs, q.attempt, retry?.maxAttempts)
}

/** The queue members of a summary, as a start or launch writes them (see {@link queueMembers}). */
export const placement = (
  queue: string,
  priority: number,
  availableAtMs: number,
  attempt: number,
  maxAttempts: number | undefined
): Pick<RunSummary, "queue" | "priority" | "availableAt" | "attempt" | "maxAttempts"> => ({
  queue,
  priority,
  availableAt: availableAtMs,
  attempt,
  ...(maxAttempts === undefined ? {} : { maxAttempts })
})

/** Only the durable members of a summary are written back (derived ones are recomputed on read). */
export const durableSummary = (summary: RunSummary): RunSummary => {
  const {
    launchedBy: _l,
    pendingWaits: _w,
    pendingResume: _r,
    cancellation: _c,
    codeDrift: _d,
    origin: _o,
    waitingReason: _wr,
    steering: _s,
    queue: _q,
    priority: _p,
    availableAt: _a,
    attempt: _at,
    maxAttempts: _m,
    readable: _rd,
    issue: _is,
    ...rest
  } = summary
  return rest
}

/** Terminal store statuses. */
export const isTerminalStore = (status: StoreStatus) => status === "completed" || status === "failed" || status === "cancelled"
