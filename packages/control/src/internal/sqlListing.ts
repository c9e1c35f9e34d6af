/**
 * Listing: `queryRuns` (keyset over the commit-ordered `flows_runs.row_seq`, filters evaluated in SQL),
 * `pageRunIds`, `hostCandidates` and `hostProbe`.
 */
import * as Heartbeat from "@baton/run-store/Heartbeat"
import type { Fragment } from "@effect/sql/Statement"
import { Duration, Effect } from "effect"
import { InvalidInput } from "../ControlError.js"
import type {
  HostCandidate,
  HostCandidatePage,
  HostCandidateQuery,
  HostProbe,
  HostProbeQuery,
  IdPage,
  IdPageRequest,
  RunPage,
  RunQuery
} from "../ControlRuntime.js"
import { checkLimit, checkOrdinal, cursorIssue } from "./runtimeChecks.js"
import type { SqlContext } from "./sqlContext.js"
import { persist } from "./sqlContext.js"
import { idSet, jsonMember } from "./sqlFragments.js"
import type { Tables } from "./sqlPage.js"
import { readPage, settleState } from "./sqlPage.js"
import { assemble } from "./sqlProjection.js"
import { awaitEnded, settledRowSeq } from "./sqlSettled.js"
import type { RawRow } from "./sqlRows.js"
import { toRow } from "./sqlRows.js"
import { released } from "./queueSql.js"

const terminalList = "('completed', 'failed', 'cancelled')"

/** SQL expressions over `flows_runs r` that agree with the projection */
export const runExpressions = (ctx: SqlContext) => {
  const { sql } = ctx
  const state = sql`r.state_json`
  const member = (path: string) => jsonMember(ctx, state, path)
  const isControl = sql`(${member("$.runId")} IS NOT NULL OR ${member("$.flowId")} IS NOT NULL OR ${member("$.status")} IS NOT NULL)`
  const flowId = sql`(CASE WHEN ${isControl} THEN ${member("$.flowId")} ELSE ${member("$.flowName")} END)`
  // The row's status wins: a control status is kept only while it is in step with the row (both
  // terminal and equal, or both non-terminal), as the projection's repair does.
  const summaryStatus = member("$.status")
  const inStep = sql`(${summaryStatus} = r.status OR (${summaryStatus} NOT IN ${sql.literal(terminalList)}
    AND r.status NOT IN ${sql.literal(terminalList)}))`
  const baseStatus = sql`(CASE WHEN ${isControl} AND ${inStep} THEN ${summaryStatus}
    ELSE (CASE r.status WHEN 'pending' THEN 'accepted' WHEN 'suspended' THEN 'parked' ELSE r.status END) END)`
  // `walk` (a CTE of the listing) holds the ancestors (inclusive) of open approval waits. An
  // IN-subquery, not a join: PostgreSQL then keeps the ordered index scan on row_seq that stops
  // after limit + 1 matches (a hash join made it evaluate every row past the cursor).
  const status = sql`(CASE WHEN r.run_id IN (SELECT ancestor_id FROM walk) AND ${baseStatus} NOT IN ${sql.literal(terminalList)}
    THEN 'waiting-approval' ELSE ${baseStatus} END)`
  const parent = (withSpawn: boolean) =>
    withSpawn
      ? sql`COALESCE(r.parent_run_id,
          (SELECT pe.parent_id FROM flows_run_parents pe WHERE pe.child_id = r.run_id ORDER BY pe.seq LIMIT 1),
          (CASE WHEN ${isControl} THEN ${member("$.parentRunId")} END))`
      : sql`COALESCE(r.parent_run_id, (CASE WHEN ${isControl} THEN ${member("$.parentRunId")} END))`
  const lineage = sql`COALESCE(r.lineage_id, (CASE WHEN ${isControl} THEN ${member("$.lineageId")} END))`
  return { isControl, flowId, baseStatus, status, parent, lineage, member }
}

const leaseStaleAfterMs = Duration.toMillis(Heartbeat.heartbeatStaleAfter)

/** SQL: `AND` the run's flow is one of `flowIds` (nothing when absent). */
export const flowFilter = (ctx: SqlContext, flowIds: ReadonlyArray<string> | undefined): Fragment =>
  flowIds === undefined ? ctx.sql`` : ctx.sql`AND ${runExpressions(ctx).member("$.flowId")} IN ${idSet(ctx, flowIds)}`

/** SQL: `flows_runs r` holds a lease lapsed at `nowMs`: a claim or an owner's stamp older than the stale cutoff. */
/** SQL: `AND` the launch `cr` is in none of `queues` (nothing when there are none). */
export const queueSkip = (ctx: SqlContext, queues: ReadonlyArray<string> | undefined): Fragment =>
  queues === undefined || queues.length === 0 ? ctx.sql`` : ctx.sql`AND cr.queue NOT IN ${idSet(ctx, queues)}`

/** The check of a `skipQueues` member: an array of strings, or absent. */
export const skipQueuesIssue = (queues: unknown): string | undefined =>
  queues === undefined || (Array.isArray(queues) && queues.every((q) => typeof q === "string"))
    ? undefined
    : "skipQueues: must be an array of strings"

export const lapsedLease = (ctx: SqlContext, nowMs: number): Fragment => {
  const cutoff = nowMs - leaseStaleAfterMs
  return ctx.sql`((r.claim_host_id IS NOT NULL AND r.claimed_at_ms < ${cutoff})
    OR (r.status = 'running' AND r.heartbeat_at_ms < ${cutoff}))`
}

/** SQL scalar: the newest lease stamp of the running launched runs of `flowIds` (NULL when none). */
export const newestLease = (ctx: SqlContext, flowIds: ReadonlyArray<string> | undefined): Fragment =>
  ctx.sql`(SELECT MAX(r.heartbeat_at_ms) FROM control_runs cr JOIN flows_runs r ON r.run_id = cr.run_id
    WHERE r.status = 'running' ${flowFilter(ctx, flowIds)})`

/**
 * SQL: the CTE `busy (queue, n)`: the running runs of each queue with a concurrency limit, counted once per
 * statement (the candidates join it as `b` to leave out queues running their limit).
 */
export const busyQueues = (ctx: SqlContext): Fragment =>
  ctx.sql`busy AS (
    SELECT bc.queue, COUNT(*) AS n FROM control_queues bq
      JOIN control_runs bc ON bc.queue = bq.queue JOIN flows_runs br ON br.run_id = bc.run_id
    WHERE bq.concurrency IS NOT NULL AND br.status = 'running' GROUP BY bc.queue
  )`

/** Listing operations bound to one runtime context. */
export const makeListing = (ctx: SqlContext) => {
  const { sql } = ctx
  const x = runExpressions(ctx)

  // `bound`: only rows at or below this `row_seq` (a settled number, see `sqlSettled`).
  const selectionOf = (query: RunQuery, tables: Tables, bound?: number) => {
    const withSpawn = tables.spawnEdges
    const f = query.filters ?? {}
    const newest = query.order === "newest"
    const conditions: Array<Fragment> = []
    if (query.cursor !== undefined) {
      conditions.push(newest ? sql`r.row_seq < ${query.cursor.rowSeq}` : sql`r.row_seq > ${query.cursor.rowSeq}`)
    }
    if (bound !== undefined) conditions.push(sql`r.row_seq <= ${bound}`)
    if (f.flowId !== undefined) conditions.push(sql`${x.flowId} = ${f.flowId}`)
    if (f.status !== undefined) conditions.push(sql`${x.status} = ${f.status}`)
    if (f.terminal !== undefined) {
      conditions.push(f.terminal ? sql`${x.status} IN ${sql.literal(terminalList)}` : sql`${x.status} NOT IN ${sql.literal(terminalList)}`)
    }
    if (f.parentRunId !== undefined) conditions.push(sql`${x.parent(withSpawn)} = ${f.parentRunId}`)
    if (f.lineageId !== undefined) conditions.push(sql`${x.lineage} = ${f.lineageId}`)
    if (f.since !== undefined) conditions.push(sql`r.created_at_ms >= ${f.since}`)
    if (f.until !== undefined) conditions.push(sql`r.created_at_ms < ${f.until}`)
    if (f.launchedBy !== undefined) {
      conditions.push(sql`cr.principal_id = ${f.launchedBy.id}`)
      if (f.launchedBy.kind !== undefined) conditions.push(sql`cr.principal_kind = ${f.launchedBy.kind}`)
    }
    if (f.runIds !== undefined) conditions.push(sql`r.run_id IN ${idSet(ctx, f.runIds)}`)
    if (f.queue !== undefined) conditions.push(sql`cr.queue = ${f.queue}`)
    return {
      where: conditions.length === 0 ? sql`` : sql`WHERE ${sql.and(conditions)}`,
      keyset: { order: newest ? "DESC" as const : "ASC" as const, limit: query.limit + 1 },
      approvalWalk: f.status !== undefined || f.terminal !== undefined
    }
  }

  const checkQuery = (query: RunQuery) =>
    Effect.gen(function*() {
      const limit = yield* checkLimit(query.limit)
      const f = query.filters ?? {}
      yield* checkOrdinal("since", f.since)
      yield* checkOrdinal("until", f.until)
      if (query.cursor !== undefined) {
        const ok = typeof query.cursor.runId === "string" && Number.isSafeInteger(query.cursor.rowSeq) && query.cursor.rowSeq >= 0
        if (!ok) return yield* Effect.fail(new InvalidInput({ issue: "cursor: must be a cursor this listing returned" }))
      }
      if (query.order !== undefined && query.order !== "newest" && query.order !== "oldest") {
        return yield* Effect.fail(new InvalidInput({ issue: "order: must be newest or oldest" }))
      }
      return limit
    })

  // The highest run number this runtime has seen settled on PostgreSQL (see `sqlSettled`): a settled
  // number stays settled (run numbers only ever come from the sequence, which never moves back), so a
  // page whose rows are all at or below it needs no settle read of its own.
  let settledUpTo: number | undefined
  const noteSettled = (last: number) => {
    if (settledUpTo === undefined || last > settledUpTo) settledUpTo = last
  }

  // A cursor is the key of the last row a page selected: a (rowSeq, runId) naming no such row is forged
  // (or its run was deleted since) and would silently skip runs. The page statement reads the cursor's row.
  const queryRuns = (query: RunQuery): Effect.Effect<RunPage, InvalidInput | import("../ControlError.js").PersistenceError> =>
    Effect.gen(function*() {
      const limit = yield* checkQuery(query)
      const operation = "list runs"
      const read = (bound?: number) =>
        readPage(ctx, (tables) => selectionOf({ ...query, limit }, tables, bound), operation, query.cursor?.runId)
      // PostgreSQL reads how far run numbers have settled before its page (SQLite numbers runs in commit
      // order), unless a full page here can lie at or below the number it already knows settled (an
      // oldest-first page's 51 rows reach at least 51 past its cursor; a newest-first one lies below it).
      const known = settledUpTo
      const after = query.cursor?.rowSeq ?? 0
      const withinKnown = known !== undefined && (query.order === "newest"
        ? query.cursor !== undefined && query.cursor.rowSeq <= known + 1
        : after + limit + 1 <= known)
      const settle = ctx.isPostgres && !withinKnown ? yield* settleState(ctx, operation) : undefined
      let page = yield* read()
      if (query.cursor !== undefined && page.cursorRowSeq !== query.cursor.rowSeq) {
        return yield* Effect.fail(new InvalidInput({ issue: cursorIssue }))
      }
      let more = page.rows.length > limit
      // A page that hands out a cursor must not pass a number whose create may still commit (on
      // PostgreSQL numbers are not taken in commit order): every row it lists must be at or below a
      // settled number. The settle state read the sequence, then the writes then in flight: with none,
      // its number is settled and this page (read after it) misses nothing below it; otherwise wait for
      // them and read again below it. A last page hands out no cursor and keeps every committed row.
      if (more && settle !== undefined) {
        const listed = page.rows.slice(0, limit)
        if (settle.holders.length > 0 || listed.some((r) => r.rowSeq > settle.last)) {
          yield* awaitEnded(ctx, operation, "flows_runs", settle.holders)
          noteSettled(settle.last)
          page = yield* read(settle.last)
          more = page.rows.length > limit
        } else {
          noteSettled(settle.last)
          more = page.rows[limit]!.rowSeq <= settle.last
        }
      } else if (more && withinKnown && ctx.isPostgres && page.rows.some((r) => r.rowSeq > known)) {
        // Read without a settle read, and past the known number: settle now, then read again (the page
        // above was read before the settle read, so it may miss a create that committed in between).
        const late = yield* settleState(ctx, operation)
        if (late !== undefined) {
          yield* awaitEnded(ctx, operation, "flows_runs", late.holders)
          noteSettled(late.last)
          page = yield* read(late.last)
          more = page.rows.length > limit
        }
      }
      const selected = page.rows.slice(0, limit)
      if (selected.length === 0) return { items: [] }
      const items = (yield* assemble(selected, page)).map((projected) => projected.summary)
      const last = selected.at(-1)!
      return {
        items,
        ...(more ? { nextCursor: { rowSeq: last.rowSeq, runId: last.runId } } : {})
      }
    })

  const pageRunIds = (request: IdPageRequest): Effect.Effect<IdPage, InvalidInput | import("../ControlError.js").PersistenceError> =>
    Effect.gen(function*() {
      const limit = yield* checkLimit(request.limit)
      const after = (yield* checkOrdinal("after", request.after)) ?? 0
      const given = yield* checkOrdinal("through", request.through)
      const through = given ?? (ctx.isPostgres
        ? yield* settledRowSeq(ctx, "page run ids")
        : Number(
          (yield* sql<{ m: number | null }>`SELECT MAX(row_seq) AS m FROM flows_runs`.pipe(persist("page run ids")))[0]?.m ?? 0
        ))
      const rows = yield* sql<{ run_id: string; row_seq: number }>`SELECT run_id, row_seq FROM flows_runs
        WHERE row_seq > ${after} AND row_seq <= ${through} ORDER BY row_seq LIMIT ${limit + 1}`.pipe(persist("page run ids"))
      const page = rows.slice(0, limit)
      return {
        ids: page.map((r) => r.run_id),
        through,
        ...(rows.length > limit ? { next: Number(page.at(-1)!.row_seq) } : {})
      }
    })

  const checkCandidateQuery = (query: HostProbeQuery | HostCandidateQuery) =>
    Effect.gen(function*() {
      if (!Number.isSafeInteger(query.nowMs) || query.nowMs < 0) {
        return yield* Effect.fail(new InvalidInput({ issue: "nowMs: must be a non-negative safe integer" }))
      }
      if (query.flowIds !== undefined && !query.flowIds.every((f) => typeof f === "string")) {
        return yield* Effect.fail(new InvalidInput({ issue: "flowIds: must be strings" }))
      }
      const skip = "skipQueues" in query ? skipQueuesIssue(query.skipQueues) : undefined
      if (skip !== undefined) return yield* Effect.fail(new InvalidInput({ issue: skip }))
    })

  const flowFilterOf = (query: HostProbeQuery) => flowFilter(ctx, query.flowIds)

  // Leases (stale owners, orphaned claims) whatever their queue's state: they are runs already taken,
  // not new work. Released runs only when available by now in a queue neither paused nor running its
  // limit already. `busy` (a CTE the statement starts with) counts the running runs of limited queues
  // once per statement.
  const busy = busyQueues(ctx)
  const candidateFrom = sql`control_runs cr JOIN flows_runs r ON r.run_id = cr.run_id
    LEFT JOIN control_queues q ON q.queue = cr.queue LEFT JOIN busy b ON b.queue = cr.queue`
  const candidateWhere = (query: HostProbeQuery | HostCandidateQuery) => {
    const skip = "skipQueues" in query ? queueSkip(ctx, query.skipQueues) : sql``
    return sql`r.status NOT IN ${sql.literal(terminalList)} ${flowFilterOf(query)}
      AND (${lapsedLease(ctx, query.nowMs)}
        OR (${released(sql)} AND cr.available_at_ms <= ${query.nowMs} AND COALESCE(q.paused, 0) = 0 ${skip}
          AND (q.concurrency IS NULL OR COALESCE(b.n, 0) < q.concurrency)))`
  }

  const hostCandidates = (query: HostCandidateQuery): Effect.Effect<HostCandidatePage, InvalidInput | import("../ControlError.js").PersistenceError> =>
    Effect.gen(function*() {
      const limit = yield* checkLimit(query.limit)
      yield* checkCandidateQuery(query)
      const cutoff = query.nowMs - leaseStaleAfterMs
      // Lapsed leases first, then released runs in claim order.
      const rows = yield* sql<RawRow & { control_status: string | null; flow_id: string | null; updated_at: unknown; queue: string }>`
        WITH ${busy}
        SELECT r.row_seq, r.run_id, r.status, r.created_at_ms, r.started_at_ms, r.finished_at_ms,
          r.owner_host_id, r.owner_pid, r.owner_nonce, r.heartbeat_at_ms,
          r.claim_host_id, r.claim_pid, r.claim_nonce, r.claimed_at_ms,
          r.parent_run_id, r.lineage_id, r.round_ordinal, r.cancel_requested_at_ms,
          r.waiting_reason, r.waiting_token, r.waiting_request, r.state_json,
          cr.run_id AS launch_run_id, cr.created_seq, cr.principal_id, cr.principal_kind, NULL AS requested_seq,
          ${x.member("$.status")} AS control_status, ${x.member("$.flowId")} AS flow_id, ${x.member("$.updatedAt")} AS updated_at,
          cr.queue, cr.priority, cr.available_at_ms, cr.attempt, cr.retry_json
        FROM ${candidateFrom}
        WHERE ${candidateWhere(query)}
        ORDER BY (CASE WHEN r.status = 'suspended' AND r.claim_host_id IS NULL THEN 1 ELSE 0 END),
          cr.priority DESC, cr.available_at_ms, cr.created_seq
        LIMIT ${limit}`.pipe(persist("find host candidates"))
      const candidates = rows.flatMap((raw): Array<HostCandidate> => {
        const row = toRow(raw)
        const base = {
          runId: row.runId,
          flowId: String(raw.flow_id ?? ""),
          createdSeq: row.createdSeq ?? 0,
          queue: String(raw.queue),
          updatedAt: Number(raw.updated_at ?? row.createdAtMs)
        }
        if (row.claim !== null && row.claimedAtMs !== null && row.claimedAtMs < cutoff) {
          return [{ ...base, kind: "orphaned-claim", claim: row.claim, claimedAtMs: row.claimedAtMs }]
        }
        if (row.status === "running" && row.heartbeatAtMs !== null && row.heartbeatAtMs < cutoff && row.owner !== null) {
          return [{ ...base, kind: "stale-owner", owner: row.owner, heartbeatAtMs: row.heartbeatAtMs }]
        }
        if (row.status === "suspended" && row.waitingReason === null && row.claim === null && raw.control_status === "accepted") {
          return [{ ...base, kind: "released" }]
        }
        return []
      })
      // The stamps matter only to a host about to claim something: an empty page reads none.
      if (candidates.length === 0) return { candidates }
      const newest = yield* sql<{ m: number | null }>`SELECT ${newestLease(ctx, query.flowIds)} AS m`.pipe(
        persist("find host candidates")
      )
      const m = newest[0]?.m
      return { candidates, ...(m === null || m === undefined ? {} : { newestHeartbeatAtMs: Number(m) }) }
    })

  const hostProbe = (query: HostProbeQuery): Effect.Effect<HostProbe, InvalidInput | import("../ControlError.js").PersistenceError> =>
    Effect.gen(function*() {
      yield* checkCandidateQuery(query)
      const rows = yield* sql<{ signals: unknown; resumes: unknown; candidates: unknown }>`
        WITH ${busy}
        SELECT
          (CASE WHEN EXISTS (SELECT 1 FROM control_signal_commands WHERE state = 'pending') THEN 1 ELSE 0 END) AS signals,
          (CASE WHEN EXISTS (SELECT 1 FROM control_run_resumes rr JOIN flows_runs r ON r.run_id = rr.run_id
            WHERE r.status NOT IN ${sql.literal(terminalList)}) THEN 1 ELSE 0 END) AS resumes,
          (CASE WHEN EXISTS (SELECT 1 FROM ${candidateFrom} WHERE ${candidateWhere(query)}) THEN 1 ELSE 0 END) AS candidates`
        .pipe(persist("probe for host work"))
      const row = rows[0]
      return {
        signals: Number(row?.signals ?? 1) === 1,
        resumes: Number(row?.resumes ?? 1) === 1,
        candidates: Number(row?.candidates ?? 1) === 1
      }
    })

  return { queryRuns, pageRunIds, hostCandidates, hostProbe }
}
