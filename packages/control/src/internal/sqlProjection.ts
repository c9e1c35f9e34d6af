/**
 * Projection of run rows into `RunSummary`: lineage, open waits rolled up to attached ancestors,
 * resume delegation, origin and cancel attribution. Optional engine tables degrade to "no evidence".
 */
import * as Dialect from "@baton/database/Dialect"
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"
import * as Cancellation from "../Cancellation.js"
import type { PersistenceError } from "../ControlError.js"
import * as ControlExecutor from "../ControlExecutor.js"
import type { Json, PendingWait, RunSummary } from "../ControlSchema.js"
import { isTerminalStatus } from "../ControlSchema.js"
import * as Lineage from "../Lineage.js"
import * as CancelEvidence from "./cancelEvidence.js"
import type { SqlContext } from "./sqlContext.js"
import { persist } from "./sqlContext.js"
import type { RunRow } from "./sqlRows.js"
import { readState, unreadableSummary, withLaunchedBy } from "./sqlRows.js"

/** A set of ids as one JSON parameter, expanded in SQL (no bind-variable limit). */
export const idSet = (ctx: SqlContext, ids: ReadonlyArray<string>): Fragment =>
  ctx.isPostgres
    ? ctx.sql`(SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))`
    : ctx.sql`(SELECT value FROM json_each(${JSON.stringify(ids)}))`

/**
 * A JSON member of a text column, NULL when the text is not valid JSON (a corrupt row never fails a scan).
 * PostgreSQL's CHECK constraints cannot be bypassed, so stored JSON there is valid and the guard is skipped
 * (its helper opens a subtransaction, which a parallel scan refuses).
 */
export const jsonMember = (ctx: SqlContext, column: Fragment, path: string): Fragment =>
  ctx.isPostgres
    ? Dialect.jsonText(ctx.sql, column, path)
    : ctx.sql`(CASE WHEN ${Dialect.jsonValid(ctx.sql, column)} THEN ${Dialect.jsonText(ctx.sql, column, path)} END)`

/** Parent edges for the wait walk: spawn edges (unless the child detaches) and trampoline parents. */
export const waitEdges = (ctx: SqlContext, withSpawn: boolean): Fragment => {
  const trampoline = ctx.sql`SELECT run_id AS child_id, parent_run_id AS parent_id FROM flows_runs WHERE parent_run_id IS NOT NULL`
  if (!withSpawn) return trampoline
  return ctx.sql`SELECT pe.child_id AS child_id, pe.parent_id AS parent_id FROM flows_run_parents pe
      JOIN flows_runs c ON c.run_id = pe.child_id
      WHERE COALESCE(${jsonMember(ctx, ctx.sql`c.state_json`, "$.onParentExit")}, 'cancel') <> 'detach'
    UNION ALL ${trampoline}`
}

/** The recursive wait walk `walk(wait_id, ancestor_id, depth)` over open waits with the given reasons. */
export const waitWalk = (ctx: SqlContext, withSpawn: boolean, reasons: ReadonlyArray<string>): Fragment =>
  ctx.sql`WITH RECURSIVE edges(child_id, parent_id) AS (${waitEdges(ctx, withSpawn)}),
    walk(wait_id, ancestor_id, depth) AS (
      SELECT run_id, run_id, 0 FROM flows_runs
        WHERE waiting_reason IN ${ctx.sql.in(reasons as Array<string>)} AND waiting_token IS NOT NULL
          AND status NOT IN ('completed', 'failed', 'cancelled')
      UNION
      SELECT w.wait_id, e.parent_id, w.depth + 1 FROM walk w JOIN edges e ON e.child_id = w.ancestor_id
        WHERE w.depth < 64
    )`

interface WaitRow {
  readonly ancestor_id: string
  readonly wait_id: string
  readonly depth: number
  readonly waiting_reason: string
  readonly waiting_token: string | null
  readonly waiting_request: string | null
  readonly created_at_ms: number
  readonly wait_flow: string | null
}

const readWaits = (ctx: SqlContext, scope: ReadonlyArray<string>) => {
  const query = (withSpawn: boolean) =>
    ctx.sql<WaitRow>`${waitWalk(ctx, withSpawn, ["approval", "event"])}
      SELECT x.ancestor_id, x.wait_id, x.depth, wr.waiting_reason, wr.waiting_token, wr.waiting_request, wr.created_at_ms,
        COALESCE(${jsonMember(ctx, ctx.sql`wr.state_json`, "$.flowId")}, ${jsonMember(ctx, ctx.sql`wr.state_json`, "$.flowName")}) AS wait_flow
      FROM (SELECT wait_id, ancestor_id, MIN(depth) AS depth FROM walk
              WHERE ancestor_id IN ${idSet(ctx, scope)} GROUP BY wait_id, ancestor_id) x
      JOIN flows_runs wr ON wr.run_id = x.wait_id
      ORDER BY x.ancestor_id, x.depth, wr.created_at_ms, wr.run_id`
  return ctx.optional(query(true), query(false))
}

const readExecutionFlows = (ctx: SqlContext, ids: ReadonlyArray<string>) =>
  ctx.optional(
    ctx.sql<{ run_id: string; execution_flow: string | null }>`SELECT run_id, execution_flow FROM flows_runs
      WHERE run_id IN ${idSet(ctx, ids)}`,
    Effect.succeed([])
  )

const readSpawnParents = (ctx: SqlContext, ids: ReadonlyArray<string>) =>
  ctx.optional(
    ctx.sql<{ child_id: string; parent_id: string }>`SELECT child_id, parent_id FROM flows_run_parents
      WHERE child_id IN ${idSet(ctx, ids)} ORDER BY seq DESC`,
    Effect.succeed([])
  ).pipe(Effect.map((rows) => {
    // Ordered by seq descending, so the last write per child is its lowest seq: the creating parent.
    const byChild = new Map<string, string>()
    for (const row of rows) byChild.set(row.child_id, row.parent_id)
    return byChild
  }))

interface EventRow {
  readonly run_id: string
  readonly seq: number
  readonly event_type: string
  readonly payload_json: string
  readonly emitted_at_ms: number
}

const readEvents = (ctx: SqlContext, ids: ReadonlyArray<string>, types: ReadonlyArray<string>) =>
  ctx.optional(
    ctx.sql<EventRow>`SELECT run_id, seq, event_type, payload_json, emitted_at_ms FROM flows_journal_events
      WHERE run_id IN ${idSet(ctx, ids)} AND event_type IN ${ctx.sql.in(types as Array<string>)}
      ORDER BY run_id, seq`,
    Effect.succeed([])
  )

interface ChainRow {
  readonly runId: string
  readonly parentRunId: string | undefined
  readonly cancelRequestedAt: number | undefined
}

/** Ancestor chains of the scope (run first, then ancestors), one read per level, visited set, depth ≤ 64. */
const readChains = (ctx: SqlContext, rows: ReadonlyArray<RunRow>, spawn: ReadonlyMap<string, string>) =>
  Effect.gen(function*() {
    const chain = new Map<string, ChainRow>()
    const parentOf = (runId: string, parentRunId: string | null, fallback: string | undefined) =>
      parentRunId ?? spawn.get(runId) ?? fallback
    for (const row of rows) {
      chain.set(row.runId, {
        runId: row.runId,
        parentRunId: parentOf(row.runId, row.parentRunId, undefined),
        cancelRequestedAt: row.cancelRequestedAtMs ?? undefined
      })
    }
    let frontier = [...new Set([...chain.values()].map((c) => c.parentRunId).filter((p): p is string => p !== undefined && !chain.has(p)))]
    for (let depth = 0; depth < 64 && frontier.length > 0; depth++) {
      const found = yield* ctx.sql<{ run_id: string; parent_run_id: string | null; cancel_requested_at_ms: number | null }>`
        SELECT run_id, parent_run_id, cancel_requested_at_ms FROM flows_runs WHERE run_id IN ${idSet(ctx, frontier)}`
      const roots = found.filter((r) => r.parent_run_id === null).map((r) => r.run_id)
      const edges = roots.length === 0 ? new Map<string, string>() : yield* readSpawnParents(ctx, roots)
      for (const r of found) {
        chain.set(r.run_id, {
          runId: r.run_id,
          parentRunId: r.parent_run_id ?? edges.get(r.run_id),
          cancelRequestedAt: r.cancel_requested_at_ms === null ? undefined : Number(r.cancel_requested_at_ms)
        })
      }
      frontier = [...new Set(found.map((r) => chain.get(r.run_id)!.parentRunId).filter((p): p is string => p !== undefined && !chain.has(p)))]
    }
    return chain
  })

const parseJson = (text: string | null): unknown => {
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

const baseOf = (row: RunRow): Projected => {
  const reading = readState(row)
  switch (reading._tag) {
    case "Summary":
      return { summary: withLaunchedBy(row, reading.summary) }
    case "Foreign":
      return { summary: withLaunchedBy(row, unreadableSummary(row, reading.issue)) }
    case "Corrupt":
      return { summary: withLaunchedBy(row, unreadableSummary(row, reading.error.message)), error: reading.error }
  }
}

/**
 * Project rows (in order) into full summaries. One row's unreadable stored value never fails the call:
 * the row is projected from its columns and flagged (see `Projected`).
 */
export const projectRows = (
  ctx: SqlContext,
  rows: ReadonlyArray<RunRow>
): Effect.Effect<ReadonlyArray<Projected>, PersistenceError> =>
  Effect.gen(function*() {
    if (rows.length === 0) return []
    const bases = rows.map(baseOf)
    const ids = rows.map((r) => r.runId)
    const spawn = yield* readSpawnParents(ctx, ids)
    const chains = yield* readChains(ctx, rows, spawn)
    const chainIds = [...chains.keys()]
    const waitRows = yield* readWaits(ctx, ids)
    const flows = new Map((yield* readExecutionFlows(ctx, [...new Set(waitRows.map((w) => w.wait_id))])).map((r) => [r.run_id, r.execution_flow]))
    const events = yield* readEvents(ctx, chainIds, [...CancelEvidence.evidenceEventTypes, Lineage.forkCreatedEventType])
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
    const waitsByAncestor = new Map<string, Array<PendingWait>>()
    for (const w of waitRows) {
      const request = parseJson(w.waiting_request) as Json | undefined
      const flowId = flows.get(w.wait_id) ?? w.wait_flow ?? undefined
      const wait = yield* ControlExecutor.pendingWaitOf({
        runId: w.wait_id,
        ...(flowId === undefined || flowId === null ? {} : { flowId }),
        reason: w.waiting_reason,
        token: w.waiting_token,
        ...(request === undefined ? {} : { request }),
        createdAt: Number(w.created_at_ms)
      })
      if (wait === undefined) continue
      const list = waitsByAncestor.get(w.ancestor_id) ?? []
      list.push(wait)
      waitsByAncestor.set(w.ancestor_id, list)
    }
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
      const summary: RunSummary = {
        ...base,
        ...(waits !== undefined && waits.length > 0 && !terminal && waits.some((w) => w.reason === "approval")
          ? { status: "waiting-approval" as const }
          : {}),
        ...(waits !== undefined && waits.length > 0 ? { pendingWaits: waits } : {}),
        ...(row.pendingResume === null || terminal ? {} : { pendingResume: row.pendingResume }),
        ...(parentRunId === undefined ? {} : { parentRunId }),
        ...(lineageId === undefined ? {} : { lineageId }),
        ...(roundOrdinal === undefined ? {} : { roundOrdinal }),
        ...(origin === undefined ? {} : { origin }),
        ...(row.waitingReason === null ? {} : { waitingReason: row.waitingReason }),
        ...(cancellation === undefined ? {} : { cancellation }),
        ...(error === undefined ? {} : { readable: false as const, issue: error.message })
      }
      return { summary, error }
    })
  }).pipe(persist("project runs"))
