/**
 * A page of runs and everything their projection reads, in one statement answering, as JSON arrays, the
 * page's rows, their ancestor chains (parents and cancel requests), the open waits below them and the
 * cancel evidence in their journals, with the cursor's row. Which optional engine tables and columns
 * exist decides the statement's text (it never names a missing one): the page statement states them
 * itself, and is read again when they differ from the ones it was built with. A PostgreSQL listing reads
 * how far run numbers have settled before its page (SQLite numbers runs in commit order).
 */
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"
import type { PersistenceError } from "../ControlError.js"
import * as CancelEvidence from "./cancelEvidence.js"
import * as Lineage from "../Lineage.js"
import type { SqlContext } from "./sqlContext.js"
import { persist, persistenceError } from "./sqlContext.js"
import { jsonArray, jsonMember, jsonValues, waitEdges, waitWalkCtes } from "./sqlFragments.js"
import type { RawRow, RunRow } from "./sqlRows.js"
import { runColumnNames, runColumns, runFrom, toRowFromValues } from "./sqlRows.js"
import { holdersOf, writeHoldersJson } from "./sqlSettled.js"

/** Which optional engine tables and columns exist. */
export interface Tables {
  /** `flows_run_parents` (an engine's spawn edges). */
  readonly spawnEdges: boolean
  /** `flows_runs.execution_flow` (an engine's flow of record). */
  readonly executionFlow: boolean
  /** `flows_journal_events`. */
  readonly journal: boolean
}

/**
 * How far run numbers have settled on PostgreSQL: the last number the run number sequence had handed out
 * when read, and the transactions then holding a write lock on `flows_runs` (every number at or below
 * `last` is settled once they have ended). `undefined` without the sequence.
 */
export type Settle = { readonly last: number; readonly holders: ReadonlyArray<string> } | undefined

const yes = (value: unknown): boolean => Number(value) === 1

const tableColumns = (ctx: SqlContext): Fragment =>
  ctx.isPostgres
    ? ctx.sql`to_regclass('flows_run_parents') IS NOT NULL AS spawn_edges,
        EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'flows_runs'::regclass
          AND attname = 'execution_flow' AND NOT attisdropped) AS execution_flow,
        to_regclass('flows_journal_events') IS NOT NULL AS journal`
    : ctx.sql`EXISTS (SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = 'flows_run_parents') AS spawn_edges,
        EXISTS (SELECT 1 FROM pragma_table_info('flows_runs') WHERE name = 'execution_flow') AS execution_flow,
        EXISTS (SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = 'flows_journal_events') AS journal`

const tablesOf = (row: RawRow): Tables => ({
  spawnEdges: yes(row.spawn_edges),
  executionFlow: yes(row.execution_flow),
  journal: yes(row.journal)
})

const sameTables = (a: Tables, b: Tables) =>
  a.spawnEdges === b.spawnEdges && a.executionFlow === b.executionFlow && a.journal === b.journal

/** One statement (PostgreSQL): the settle state (see `Settle`), the sequence read before the locks. */
export const settleState = (ctx: SqlContext, operation: string): Effect.Effect<Settle, PersistenceError> => {
  const { sql } = ctx
  return sql<RawRow>`WITH s AS MATERIALIZED (SELECT to_regclass('flows_run_row_seq') IS NOT NULL AS has_seq,
        pg_sequence_last_value(to_regclass('flows_run_row_seq')) AS last)
      SELECT s.has_seq, s.last, ${writeHoldersJson(ctx, "flows_runs", sql`s.has_seq`)} AS holders FROM s`.pipe(
    // A sequence that has handed out no number yet (a NULL last value) has settled nothing above 0.
    Effect.map(([row]): Settle =>
      yes(row!.has_seq)
        ? { last: row!.last === null ? 0 : Number(row!.last), holders: holdersOf(row!.holders as string | null) }
        : undefined
    ),
    persist(operation)
  )
}

// The tables each runtime last saw (a page statement reading over them reports them, so this never goes
// stale unnoticed).
const seen = new WeakMap<SqlContext, Tables>()

/** Which rows a page statement reads. */
export interface Selection {
  /** A `WHERE` clause over `r` (`flows_runs`) and `cr` (`control_runs`), or an empty fragment. */
  readonly where: Fragment
  /** Keyset order and row limit; without them, every matching row (a read by ids). */
  readonly keyset?: { readonly order: "ASC" | "DESC"; readonly limit: number } | undefined
  /** `where` reads the approval wait walk (`walk`), so the statement defines it. */
  readonly approvalWalk: boolean
}

/** An ancestor chain member: the run, its parent edges and its cancel request. */
export interface ChainRow {
  readonly run_id: string
  readonly parent_run_id: string | null
  /** The parent of the run's first spawn edge (lowest `seq`), when spawn edges exist. */
  readonly spawn_parent: string | null
  readonly cancel_at: number | null
}

/** An open wait at or below a page row (`ancestor_id`), `depth` hops down. */
export interface WaitRow {
  readonly ancestor_id: string
  readonly wait_id: string
  readonly depth: number
  readonly waiting_reason: string
  readonly waiting_token: string | null
  readonly waiting_request: string | null
  readonly created_at_ms: number
  readonly wait_flow: string | null
  readonly execution_flow: string | null
}

/** A journal entry that is cancel or fork evidence for a chain member. */
export interface EventRow {
  readonly run_id: string
  readonly seq: number
  readonly event_type: string
  readonly payload_json: string
  readonly emitted_at_ms: number
}

/** What one page statement answered; `rows` in keyset order. */
export interface PageRead {
  readonly rows: ReadonlyArray<RunRow>
  /** The `row_seq` of the cursor's run when one was asked about; `undefined` when no such run exists. */
  readonly cursorRowSeq: number | undefined
  readonly chain: ReadonlyArray<ChainRow>
  readonly waits: ReadonlyArray<WaitRow>
  readonly events: ReadonlyArray<EventRow>
}

/** The journal event types a projection reads. */
export const evidenceTypes: ReadonlyArray<string> = [...CancelEvidence.evidenceEventTypes, Lineage.forkCreatedEventType]

const terminal = "('completed', 'failed', 'cancelled')"

// Which answered column did not parse.
class PageColumn {
  constructor(readonly column: string) {}
}

const parseArray = (text: unknown, column: string): ReadonlyArray<Values> => {
  try {
    return JSON.parse(String(text)) as ReadonlyArray<Values>
  } catch {
    throw new PageColumn(column)
  }
}

// The page statement's one row: each array column parsed, its elements read by position.
const decodeRead = (row: RawRow, order: "ASC" | "DESC"): PageRead => ({
  rows: parseArray(row.runs, "runs").map(toRowFromValues).sort(
    order === "ASC" ? (a, b) => a.rowSeq - b.rowSeq : (a, b) => b.rowSeq - a.rowSeq
  ),
  cursorRowSeq: row.cursor_seq === null || row.cursor_seq === undefined ? undefined : Number(row.cursor_seq),
  chain: parseArray(row.chain, "chain").map(([run_id, parent_run_id, spawn_parent, cancel_at]) => ({
    run_id: run_id as string,
    parent_run_id: parent_run_id as string | null,
    spawn_parent: spawn_parent as string | null,
    cancel_at: cancel_at as number | null
  })),
  waits: parseArray(row.waits, "waits").map((
    [ancestor_id, wait_id, depth, waiting_reason, waiting_token, waiting_request, created_at_ms, wait_flow, execution_flow]
  ) => ({
    ancestor_id: ancestor_id as string,
    wait_id: wait_id as string,
    depth: Number(depth),
    waiting_reason: waiting_reason as string,
    waiting_token: waiting_token as string | null,
    waiting_request: waiting_request as string | null,
    created_at_ms: Number(created_at_ms),
    wait_flow: wait_flow as string | null,
    execution_flow: execution_flow as string | null
  })),
  events: parseArray(row.events, "events").map(([run_id, seq, event_type, payload_json, emitted_at_ms]) => ({
    run_id: run_id as string,
    seq: Number(seq),
    event_type: event_type as string,
    payload_json: payload_json as string,
    emitted_at_ms: Number(emitted_at_ms)
  }))
})

/**
 * The selected rows and what their projection reads (see the module comment), reading the row of
 * `cursorRunId` when given: one statement over the tables this runtime last saw, which also reports the
 * tables that exist, and again when they changed since (or a table it named went missing).
 */
export const readPage = (
  ctx: SqlContext,
  selection: (tables: Tables) => Selection,
  operation: string,
  cursorRunId?: string
): Effect.Effect<PageRead, PersistenceError> =>
  Effect.gen(function*() {
    const run = (tables: Tables, report: boolean) => pageStatement(ctx, tables, selection(tables), cursorRunId, report, operation)
    const known = seen.get(ctx) ?? { spawnEdges: false, executionFlow: false, journal: true }
    // A table seen before and dropped since fails the statement: read again naming no optional table,
    // which reports what exists.
    let answer = yield* ctx.optional(run(known, true), run(none, true)).pipe(persist(operation))
    if (!sameTables(answer.tables, answer.used)) answer = yield* run(answer.tables, true).pipe(persist(operation))
    seen.set(ctx, answer.tables)
    return answer.read
  })

const none: Tables = { spawnEdges: false, executionFlow: false, journal: false }

// The statement's text after the page is the same for every page of a dialect and table set:
// built and compiled once, then sent as a literal (the page's own conditions carry the parameters).
const staticText = new Map<string, { readonly ctes: string; readonly select: string }>()

const staticParts = (ctx: SqlContext, found: Tables, report: boolean) => {
  const key = JSON.stringify([ctx.isPostgres, found.spawnEdges, found.executionFlow, found.journal, report])
  const known = staticText.get(key)
  if (known !== undefined) return known
  const { sql } = ctx
  const spawn = found.spawnEdges
  const firstSpawnParent = (alias: string) =>
    spawn
      ? sql`(SELECT pe.parent_id FROM flows_run_parents pe WHERE pe.child_id = ${sql.literal(alias)}.run_id
          ORDER BY pe.seq LIMIT 1)`
      : sql`CAST(NULL AS TEXT)`
  const waitRun = sql`wr.state_json`
  const wait = jsonValues(ctx, [
    "x.root_id",
    "x.wait_id",
    "x.depth",
    "wr.waiting_reason",
    "wr.waiting_token",
    "wr.waiting_request",
    "wr.created_at_ms",
    sql`COALESCE(${jsonMember(ctx, waitRun, "$.flowId")}, ${jsonMember(ctx, waitRun, "$.flowName")})`,
    found.executionFlow ? "wr.execution_flow" : "NULL"
  ])
  const types = sql.literal(`(${evidenceTypes.map((t) => `'${t}'`).join(", ")})`)
  const events = found.journal
    ? jsonArray(
      ctx,
      jsonValues(ctx, ["e.run_id", "e.seq", "e.event_type", "e.payload_json", "e.emitted_at_ms"]),
      ctx.isPostgres
        ? sql`(SELECT DISTINCT run_id FROM chain) k CROSS JOIN LATERAL (SELECT * FROM flows_journal_events j
            WHERE j.run_id = k.run_id AND j.event_type IN ${types} OFFSET 0) e`
        : sql`flows_journal_events e WHERE e.run_id IN (SELECT run_id FROM chain) AND e.event_type IN ${types}`,
      sql`e.run_id, e.seq`
    )
    : sql`'[]'`
  // Per row of the walk (and per chain member for its journal), lookups by index: SQLite walks each edge
  // kind in its own recursive step through the parent index (CROSS JOIN keeps that order; statistics of
  // a column that is mostly NULL would otherwise make a scan look cheaper); PostgreSQL joins LATERAL
  // (OFFSET 0 keeps the subquery from being flattened), so no step hashes every child run (or every
  // evidence entry) of the database.
  const child = "c.run_id, d.depth + 1, c.waiting_reason, c.waiting_token, c.status"
  const downSteps = ctx.isPostgres
    ? sql`SELECT d.root_id, ${sql.literal(child)} FROM down d
        CROSS JOIN LATERAL (SELECT * FROM (${waitEdges(ctx, spawn)}) edge WHERE edge.parent_id = d.run_id OFFSET 0) e
        JOIN flows_runs c ON c.run_id = e.child_id
        WHERE d.depth < 64`
    : sql`SELECT d.root_id, ${sql.literal(child)} FROM down d CROSS JOIN flows_runs c INDEXED BY flows_runs_parent_run_id_idx
        WHERE c.parent_run_id = d.run_id AND d.depth < 64${
      spawn
        ? sql`
      UNION
      SELECT d.root_id, ${sql.literal(child)} FROM down d CROSS JOIN flows_run_parents pe
        JOIN flows_runs c ON c.run_id = pe.child_id
        WHERE pe.parent_id = d.run_id AND d.depth < 64
          AND COALESCE(${jsonMember(ctx, sql`c.state_json`, "$.onParentExit")}, 'cancel') <> 'detach'`
        : sql``
    }`
  // Waits are found walking down from the page's rows along the same edges the wait walk climbs, so
  // only the page's descendants are visited, never every open wait of the database; the walk carries
  // each row's wait columns, and only the waits found are read again, by key (SQLite keeps the CROSS
  // JOIN's order). Chain members are answered beyond the page's own rows (which the caller holds) and
  // for spawn parents. Each array element is an array of values in a fixed order (smaller to build and
  // to parse than objects).
  const ctes = sql`chain(run_id, parent_run_id, spawn_parent, cancel_at, depth) AS (
      SELECT p.run_id, p.parent_run_id, ${firstSpawnParent("p")}, p.cancel_requested_at_ms, 0 FROM page p
      UNION
      SELECT f.run_id, f.parent_run_id, ${firstSpawnParent("f")}, f.cancel_requested_at_ms, c.depth + 1
        FROM chain c JOIN flows_runs f ON f.run_id = COALESCE(c.parent_run_id, c.spawn_parent)
        WHERE c.depth < 64 AND COALESCE(c.parent_run_id, c.spawn_parent) IS NOT NULL
    ),
    down(root_id, run_id, depth, waiting_reason, waiting_token, status) AS (
      SELECT run_id, run_id, 0, waiting_reason, waiting_token, status FROM page
      UNION
      ${downSteps}
    )`
  // The page's rows are put in keyset order by the caller (sorting 51 numbers costs less than ordering
  // the aggregate).
  const select = sql`${jsonArray(ctx, jsonValues(ctx, runColumnNames.map((name) => `p.${name}`)), sql`page p`)} AS runs,
      ${
    jsonArray(
      ctx,
      jsonValues(ctx, ["c.run_id", "c.parent_run_id", "c.spawn_parent", "c.cancel_at"]),
      sql`(SELECT DISTINCT run_id, parent_run_id, spawn_parent, cancel_at FROM chain
        WHERE depth > 0 OR spawn_parent IS NOT NULL) c`,
      sql`c.run_id`
    )
  } AS chain,
      ${
    jsonArray(
      ctx,
      wait,
      sql`(SELECT root_id, run_id AS wait_id, MIN(depth) AS depth FROM down
          WHERE waiting_reason IN ('approval', 'event') AND waiting_token IS NOT NULL
            AND status NOT IN ${sql.literal(terminal)}
          GROUP BY root_id, run_id) x
        ${sql.literal(ctx.isPostgres ? "JOIN" : "CROSS JOIN")} flows_runs wr ${sql.literal(ctx.isPostgres ? "ON" : "WHERE")} wr.run_id = x.wait_id`,
      sql`x.root_id, x.depth, wr.created_at_ms, wr.run_id`
    )
  } AS waits,
      ${events} AS events${report ? sql`, ${tableColumns(ctx)}` : sql``}`
  const text = (fragment: Fragment) => {
    const [compiled, params] = sql`${fragment}`.compile()
    if (params.length > 0) throw new Error("a page statement's static part took parameters")
    return compiled
  }
  const parts = { ctes: text(ctes), select: text(select) }
  staticText.set(key, parts)
  return parts
}

const pageStatement = (
  ctx: SqlContext,
  found: Tables,
  selection: Selection,
  cursorRunId: string | undefined,
  report: boolean,
  operation: string
) => {
  const { sql } = ctx
  const order = selection.keyset?.order ?? "ASC"
  const keyset = selection.keyset === undefined
    ? sql``
    : sql`ORDER BY r.row_seq ${sql.literal(order)} LIMIT ${selection.keyset.limit}`
  const walk = selection.approvalWalk ? sql`${waitWalkCtes(ctx, found.spawnEdges, ["approval"])},` : sql``
  const cursor = cursorRunId === undefined ? sql`NULL` : sql`(SELECT row_seq FROM flows_runs WHERE run_id = ${cursorRunId})`
  const { ctes, select } = staticParts(ctx, found, report)
  return Effect.flatMap(
    sql<RawRow>`WITH RECURSIVE ${walk}
      page AS MATERIALIZED (SELECT ${runColumns(ctx)} FROM ${runFrom(ctx)} ${selection.where} ${keyset}),
      ${sql.literal(ctes)}
      SELECT ${cursor} AS cursor_seq, ${sql.literal(select)}`,
    ([row]) => {
      // The four arrays are decoded in one step (a page is read often, and each Effect step costs); any
      // other throw is a defect, as a bug is.
      let read: PageRead
      try {
        read = decodeRead(row!, order)
      } catch (cause) {
        if (!(cause instanceof PageColumn)) throw cause
        return Effect.fail(persistenceError(operation, `page read: ${cause.column} is not a JSON array`))
      }
      return Effect.succeed({ read, used: found, tables: report ? tablesOf(row!) : found })
    }
  )
}

type Values = ReadonlyArray<unknown>
