/**
 * A page of runs and everything their projection reads, in two statements. First a probe: which optional
 * engine tables and columns exist (so the page statement never fails on a missing one), the cursor's row,
 * and on PostgreSQL how far run numbers have settled. Then one statement answering, as JSON arrays, the
 * page's rows, their ancestor chains (parents and cancel requests), the open waits below them and the
 * cancel evidence in their journals.
 */
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"
import type { PersistenceError } from "../ControlError.js"
import * as CancelEvidence from "./cancelEvidence.js"
import * as Lineage from "../Lineage.js"
import type { SqlContext } from "./sqlContext.js"
import { persist, persistenceError } from "./sqlContext.js"
import { jsonArray, jsonColumns, jsonMember, jsonObject, waitEdges, waitWalkCtes } from "./sqlFragments.js"
import type { RawRow, RunRow } from "./sqlRows.js"
import { runColumnNames, runColumns, runFrom, toRow } from "./sqlRows.js"
import { holdersOf, writeHoldersJson } from "./sqlSettled.js"

/** What the probe found. */
export interface Probe {
  /** `flows_run_parents` (an engine's spawn edges) exists. */
  readonly spawnEdges: boolean
  /** `flows_runs.execution_flow` (an engine's flow of record) exists. */
  readonly executionFlow: boolean
  /** `flows_journal_events` exists. */
  readonly journal: boolean
  /** The `row_seq` of the cursor's run when one was asked about; `undefined` when no such run exists. */
  readonly cursorRowSeq: number | undefined
  /**
   * PostgreSQL with the run number sequence: the last number it had handed out when read, and the
   * transactions then holding a write lock on `flows_runs` (every number at or below `last` is settled
   * once they have ended). `undefined` on SQLite, which numbers runs in commit order.
   */
  readonly settle: { readonly last: number; readonly holders: ReadonlyArray<string> } | undefined
}

const yes = (value: unknown): boolean => Number(value) === 1

/** One statement: the probe (see `Probe`), reading the cursor's row when `cursorRunId` is given. */
export const probe = (ctx: SqlContext, operation: string, cursorRunId?: string): Effect.Effect<Probe, PersistenceError> => {
  const { sql } = ctx
  const cursor = cursorRunId === undefined ? sql`NULL` : sql`(SELECT row_seq FROM flows_runs WHERE run_id = ${cursorRunId})`
  const statement = ctx.isPostgres
    ? sql<RawRow>`WITH s AS MATERIALIZED (SELECT to_regclass('flows_run_row_seq') IS NOT NULL AS has_seq,
          pg_sequence_last_value(to_regclass('flows_run_row_seq')) AS last)
        SELECT to_regclass('flows_run_parents') IS NOT NULL AS spawn_edges,
          EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'flows_runs'::regclass
            AND attname = 'execution_flow' AND NOT attisdropped) AS execution_flow,
          to_regclass('flows_journal_events') IS NOT NULL AS journal,
          ${cursor} AS cursor_seq, s.has_seq, s.last,
          ${writeHoldersJson(ctx, "flows_runs", sql`s.has_seq`)} AS holders
        FROM s`
    : sql<RawRow>`SELECT
        EXISTS (SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = 'flows_run_parents') AS spawn_edges,
        EXISTS (SELECT 1 FROM pragma_table_info('flows_runs') WHERE name = 'execution_flow') AS execution_flow,
        EXISTS (SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = 'flows_journal_events') AS journal,
        ${cursor} AS cursor_seq`
  return statement.pipe(
    Effect.map(([row]): Probe => ({
      spawnEdges: yes(row!.spawn_edges),
      executionFlow: yes(row!.execution_flow),
      journal: yes(row!.journal),
      cursorRowSeq: row!.cursor_seq === null || row!.cursor_seq === undefined ? undefined : Number(row!.cursor_seq),
      // A sequence that has handed out no number yet (a NULL last value) has settled nothing above 0.
      settle: ctx.isPostgres && yes(row!.has_seq)
        ? { last: row!.last === null ? 0 : Number(row!.last), holders: holdersOf(row!.holders as string | null) }
        : undefined
    })),
    persist(operation)
  )
}

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
  readonly chain: ReadonlyArray<ChainRow>
  readonly waits: ReadonlyArray<WaitRow>
  readonly events: ReadonlyArray<EventRow>
}

/** The journal event types a projection reads. */
export const evidenceTypes: ReadonlyArray<string> = [...CancelEvidence.evidenceEventTypes, Lineage.forkCreatedEventType]

const terminal = "('completed', 'failed', 'cancelled')"

const parseArray = <A>(text: unknown, column: string): Effect.Effect<ReadonlyArray<A>, PersistenceError> =>
  Effect.try({
    try: () => JSON.parse(String(text)) as ReadonlyArray<A>,
    catch: () => persistenceError("list runs", `page read: ${column} is not a JSON array`)
  })

/** One statement: the selected rows and what their projection reads (see the module comment). */
export const readPage = (
  ctx: SqlContext,
  found: Probe,
  selection: Selection,
  operation: string
): Effect.Effect<PageRead, PersistenceError> =>
  Effect.gen(function*() {
    const { sql } = ctx
    const spawn = found.spawnEdges
    const firstSpawnParent = (alias: string) =>
      spawn
        ? sql`(SELECT pe.parent_id FROM flows_run_parents pe WHERE pe.child_id = ${sql.literal(alias)}.run_id
            ORDER BY pe.seq LIMIT 1)`
        : sql`CAST(NULL AS TEXT)`
    const keyset = selection.keyset === undefined
      ? sql``
      : sql`ORDER BY r.row_seq ${sql.literal(selection.keyset.order)} LIMIT ${selection.keyset.limit}`
    const walk = selection.approvalWalk ? sql`${waitWalkCtes(ctx, spawn, ["approval"])},` : sql``
    const waitRun = sql`wr.state_json`
    const wait = jsonObject(ctx, [
      ["ancestor_id", "x.root_id"],
      ["wait_id", "x.wait_id"],
      ["depth", "x.depth"],
      ["waiting_reason", "wr.waiting_reason"],
      ["waiting_token", "wr.waiting_token"],
      ["waiting_request", "wr.waiting_request"],
      ["created_at_ms", "wr.created_at_ms"],
      ["wait_flow", sql`COALESCE(${jsonMember(ctx, waitRun, "$.flowId")}, ${jsonMember(ctx, waitRun, "$.flowName")})`],
      ["execution_flow", found.executionFlow ? "wr.execution_flow" : "NULL"]
    ])
    const events = found.journal
      ? jsonArray(
        ctx,
        jsonColumns(ctx, "e", ["run_id", "seq", "event_type", "payload_json", "emitted_at_ms"]),
        sql`flows_journal_events e WHERE e.run_id IN (SELECT run_id FROM chain)
          AND e.event_type IN ${sql.in(evidenceTypes as Array<string>)}`,
        sql`e.run_id, e.seq`
      )
      : sql`'[]'`
    // Waits are found walking down from the page's rows along the same edges the wait walk climbs, so
    // only the page's descendants are visited, never every open wait of the database.
    const [row] = yield* sql<{ runs: string; chain: string; waits: string; events: string }>`WITH RECURSIVE ${walk}
      page AS MATERIALIZED (SELECT ${runColumns(ctx)} FROM ${runFrom(ctx)} ${selection.where} ${keyset}),
      chain(run_id, parent_run_id, spawn_parent, cancel_at, depth) AS (
        SELECT p.run_id, p.parent_run_id, ${firstSpawnParent("p")}, p.cancel_requested_at_ms, 0 FROM page p
        UNION
        SELECT f.run_id, f.parent_run_id, ${firstSpawnParent("f")}, f.cancel_requested_at_ms, c.depth + 1
          FROM chain c JOIN flows_runs f ON f.run_id = COALESCE(c.parent_run_id, c.spawn_parent)
          WHERE c.depth < 64
      ),
      down(root_id, run_id, depth) AS (
        SELECT run_id, run_id, 0 FROM page
        UNION
        SELECT d.root_id, e.child_id, d.depth + 1 FROM down d JOIN (${waitEdges(ctx, spawn)}) e ON e.parent_id = d.run_id
          WHERE d.depth < 64
      )
      SELECT
        ${jsonArray(ctx, jsonColumns(ctx, "p", runColumnNames), sql`page p`, sql`p.row_seq ${sql.literal(selection.keyset?.order ?? "ASC")}`)} AS runs,
        ${
      jsonArray(
        ctx,
        jsonColumns(ctx, "c", ["run_id", "parent_run_id", "spawn_parent", "cancel_at"]),
        sql`(SELECT DISTINCT run_id, parent_run_id, spawn_parent, cancel_at FROM chain) c`,
        sql`c.run_id`
      )
    } AS chain,
        ${
      jsonArray(
        ctx,
        wait,
        sql`(SELECT root_id, run_id AS wait_id, MIN(depth) AS depth FROM down GROUP BY root_id, run_id) x
          JOIN flows_runs wr ON wr.run_id = x.wait_id
          WHERE wr.waiting_reason IN ('approval', 'event') AND wr.waiting_token IS NOT NULL
            AND wr.status NOT IN ${sql.literal(terminal)}`,
        sql`x.root_id, x.depth, wr.created_at_ms, wr.run_id`
      )
    } AS waits,
        ${events} AS events`.pipe(persist(operation))
    const rows = yield* parseArray<RawRow>(row!.runs, "runs")
    return {
      rows: rows.map(toRow),
      chain: yield* parseArray<ChainRow>(row!.chain, "chain"),
      waits: yield* parseArray<WaitRow>(row!.waits, "waits"),
      events: yield* parseArray<EventRow>(row!.events, "events")
    }
  })
