/**
 * Projection of run rows into `RunSummary`: lineage, open waits rolled up to attached ancestors,
 * resume delegation, origin and cancel attribution. Optional engine tables degrade to "no evidence".
 */
import { Effect } from "effect"
import * as Cancellation from "../Cancellation.js"
import type { PersistenceError } from "../ControlError.js"
import * as ControlExecutor from "../ControlExecutor.js"
import type { Json, PendingWait, RunSummary } from "../ControlSchema.js"
import { isTerminalStatus } from "../ControlSchema.js"
import * as Lineage from "../Lineage.js"
import * as CancelEvidence from "./cancelEvidence.js"
import type { SqlContext } from "./sqlContext.js"
import { idSet } from "./sqlFragments.js"
import type { PageRead, WaitRow } from "./sqlPage.js"
import { readPage } from "./sqlPage.js"
import type { RunRow } from "./sqlRows.js"
import { queueMembers, readState, unreadableSummary } from "./sqlRows.js"

interface ChainEntry {
  readonly runId: string
  readonly parentRunId: string | undefined
  readonly cancelRequestedAt: number | undefined
}

/** A stored JSON text, or `undefined` when it is NULL or does not parse. */
export const parseJson = (text: string | null): unknown => {
  if (text === null) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/**
 * One projected row: its summary and, when a stored value of the run is corrupt, the decoding failure
 * (the summary is then flagged `readable: false` with the same issue). A foreign row (state that is
 * neither a control summary nor engine state) is flagged without an error.
 */
export interface Projected {
  readonly summary: RunSummary
  readonly error?: PersistenceError | undefined
}

/** A summary being completed by `assemble`: a fresh object of this call, so it is filled in place. */
type Draft = { -readonly [K in keyof RunSummary]: RunSummary[K] }

// The state's summary, or the row's columns flagged; without `launchedBy`, which `assemble` sets.
const baseOf = (row: RunRow): { readonly summary: Draft; readonly error?: PersistenceError | undefined } => {
  const reading = readState(row)
  switch (reading._tag) {
    case "Summary":
      return { summary: reading.summary }
    case "Foreign":
      return { summary: unreadableSummary(row, reading.issue) }
    case "Corrupt":
      return { summary: unreadableSummary(row, reading.error.message), error: reading.error }
  }
}

/**
 * Project rows (in order) into full summaries from what one page statement read about them (`read`:
 * their ancestor chains, the open waits below them and their cancel evidence). One row's unreadable
 * stored value never fails the call: the row is projected from its columns and flagged (see `Projected`).
 */
export const assemble = (
  rows: ReadonlyArray<RunRow>,
  read: Omit<PageRead, "rows">
): Effect.Effect<ReadonlyArray<Projected>> => {
  if (rows.length === 0) return Effect.succeed([])
  // Only open waits need an Effect step (their token digests); a page without any projects at once.
  if (read.waits.length === 0) return Effect.sync(() => project(rows, read, new Map()))
  return Effect.map(Effect.forEach(read.waits, pendingWaitOfRow), (waits) => {
    const waitsByAncestor = new Map<string, Array<PendingWait>>()
    read.waits.forEach((w, i) => {
      const wait = waits[i]
      if (wait === undefined) return
      const list = waitsByAncestor.get(w.ancestor_id) ?? []
      list.push(wait)
      waitsByAncestor.set(w.ancestor_id, list)
    })
    return project(rows, read, waitsByAncestor)
  })
}

const pendingWaitOfRow = (w: WaitRow): Effect.Effect<PendingWait | undefined> => {
  const request = parseJson(w.waiting_request) as Json | undefined
  const flowId = w.execution_flow ?? w.wait_flow ?? undefined
  return ControlExecutor.pendingWaitOf({
    runId: w.wait_id,
    ...(flowId === undefined ? {} : { flowId }),
    reason: w.waiting_reason,
    token: w.waiting_token,
    ...(request === undefined ? {} : { request }),
    createdAt: Number(w.created_at_ms)
  })
}

const project = (
  rows: ReadonlyArray<RunRow>,
  read: Omit<PageRead, "rows">,
  waitsByAncestor: ReadonlyMap<string, ReadonlyArray<PendingWait>>
): ReadonlyArray<Projected> => {
  const bases = rows.map(baseOf)
  const chains = new Map<string, ChainEntry>()
  const spawnOf = new Map(read.chain.map((c) => [c.run_id, c.spawn_parent ?? undefined]))
  // The rows' own entries come from the rows as given; their ancestors' from the statement.
  for (const row of rows) {
    chains.set(row.runId, {
      runId: row.runId,
      parentRunId: row.parentRunId ?? spawnOf.get(row.runId),
      cancelRequestedAt: row.cancelRequestedAtMs ?? undefined
    })
  }
  for (const c of read.chain) {
    if (chains.has(c.run_id)) continue
    chains.set(c.run_id, {
      runId: c.run_id,
      parentRunId: c.parent_run_id ?? c.spawn_parent ?? undefined,
      cancelRequestedAt: c.cancel_at === null ? undefined : Number(c.cancel_at)
    })
  }
  const events = read.events
  const forked = new Set(events.filter((e) => e.event_type === Lineage.forkCreatedEventType).map((e) => e.run_id))
  const { cancelledAt, issues, requests } = CancelEvidence.collect(events.map((event) => ({
    runId: event.run_id,
    eventType: event.event_type,
    payload: parseJson(event.payload_json),
    emittedAtMs: Number(event.emitted_at_ms)
  })))
  const attribution = Cancellation.attribute({
    runs: [...chains.values()].map((c) => ({
      runId: c.runId,
      ...(c.parentRunId === undefined ? {} : { parentRunId: c.parentRunId }),
      ...(c.cancelRequestedAt === undefined ? {} : { cancelRequestedAt: c.cancelRequestedAt }),
      ...(cancelledAt.has(c.runId) ? { cancelledAt: cancelledAt.get(c.runId)! } : {})
    })),
    requests
  })
  return rows.map((row, i): Projected => {
    const { error: stateError, summary: base } = bases[i]!
    const evidenceError = issues.get(row.runId)
    const error = stateError ?? evidenceError
    const chain = chains.get(row.runId)!
    const parentRunId = chain.parentRunId ?? base.parentRunId
    const lineageId = row.lineageId ?? base.lineageId
    const roundOrdinal = row.roundOrdinal ?? base.roundOrdinal
    const origin = Lineage.originOf({
      ...(parentRunId === undefined ? {} : { parentRunId }),
      ...(roundOrdinal === undefined ? {} : { roundOrdinal }),
      forked: forked.has(row.runId)
    })
    const waits = waitsByAncestor.get(row.runId)
    const terminal = isTerminalStatus(base.status)
    const cancellation = attribution.get(row.runId)
    // Assigned in place, in the order (and so with the member order) of spreading each over the base.
    const summary = base
    if (row.principal !== undefined) summary.launchedBy = row.principal
    if (waits !== undefined && waits.length > 0) {
      if (!terminal && waits.some((w) => w.reason === "approval")) summary.status = "waiting-approval"
      summary.pendingWaits = waits
    }
    if (row.pendingResume !== null && !terminal) summary.pendingResume = row.pendingResume
    if (parentRunId !== undefined) summary.parentRunId = parentRunId
    if (lineageId !== undefined) summary.lineageId = lineageId
    if (roundOrdinal !== undefined) summary.roundOrdinal = roundOrdinal
    if (origin !== undefined) summary.origin = origin
    if (row.waitingReason !== null) summary.waitingReason = row.waitingReason
    if (cancellation !== undefined) summary.cancellation = cancellation
    const placed = queueMembers(row)
    if (placed !== undefined) Object.assign(summary, placed)
    if (error !== undefined) {
      summary.readable = false
      summary.issue = error.message
    }
    return { summary, error }
  })
}

/**
 * Project rows (in order) into full summaries: one page statement over their ids (see
 * `assemble`). Fails only when the statements fail (`PersistenceError`, operation "project runs").
 */
export const projectRows = (
  ctx: SqlContext,
  rows: ReadonlyArray<RunRow>
): Effect.Effect<ReadonlyArray<Projected>, PersistenceError> =>
  Effect.gen(function*() {
    if (rows.length === 0) return []
    const operation = "project runs"
    const where = ctx.sql`WHERE r.run_id IN ${idSet(ctx, rows.map((r) => r.runId))}`
    const read = yield* readPage(ctx, () => ({ where, approvalWalk: false }), operation)
    return yield* assemble(rows, read)
  })

/**
 * One run read and projected in one page statement by id; `undefined` when
 * no such run exists. A corrupt stored value answers its `PersistenceError` beside the flagged summary.
 */
export const readProjected = (ctx: SqlContext, runId: string): Effect.Effect<Projected | undefined, PersistenceError> =>
  Effect.gen(function*() {
    const operation = "read a run"
    const read = yield* readPage(ctx, () => ({ where: ctx.sql`WHERE r.run_id = ${runId}`, approvalWalk: false }), operation)
    return read.rows.length === 0 ? undefined : (yield* assemble(read.rows, read))[0]
  })
