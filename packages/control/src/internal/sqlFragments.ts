/**
 * SQL fragments the listing and the projection share: id sets, guarded JSON members, the wait edges and
 * walk, and JSON documents built in SQL (one statement can then answer rows of several shapes).
 */
import * as Dialect from "@baton/database/Dialect"
import type { Fragment } from "@effect/sql/Statement"
import type { SqlContext } from "./sqlContext.js"

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

/** The `edges` and `walk(wait_id, ancestor_id, depth)` common table expressions over open waits with the given reasons. */
export const waitWalkCtes = (ctx: SqlContext, withSpawn: boolean, reasons: ReadonlyArray<string>): Fragment =>
  ctx.sql`edges(child_id, parent_id) AS (${waitEdges(ctx, withSpawn)}),
    walk(wait_id, ancestor_id, depth) AS (
      SELECT run_id, run_id, 0 FROM flows_runs
        WHERE waiting_reason IN ${ctx.sql.in(reasons as Array<string>)} AND waiting_token IS NOT NULL
          AND status NOT IN ('completed', 'failed', 'cancelled')
      UNION
      SELECT w.wait_id, e.parent_id, w.depth + 1 FROM walk w JOIN edges e ON e.child_id = w.ancestor_id
        WHERE w.depth < 64
    )`

/** The recursive wait walk `walk(wait_id, ancestor_id, depth)` over open waits with the given reasons. */
export const waitWalk = (ctx: SqlContext, withSpawn: boolean, reasons: ReadonlyArray<string>): Fragment =>
  ctx.sql`WITH RECURSIVE ${waitWalkCtes(ctx, withSpawn, reasons)}`

/** A JSON array of SQL values: SQLite `json_array`, PostgreSQL `json_build_array` (at most 100 values). */
export const jsonValues = (ctx: SqlContext, values: ReadonlyArray<Fragment | string>): Fragment =>
  ctx.sql`${ctx.sql.literal(ctx.isPostgres ? "json_build_array" : "json_array")}(${ctx.sql.join(", ", false)(values)})`

/**
 * The JSON array (as text, `[]` when there are no rows) of `element` over the rows of `from`, in `order`
 * (without one, in whatever order `from` yields them).
 */
export const jsonArray = (ctx: SqlContext, element: Fragment, from: Fragment, order?: Fragment): Fragment => {
  const by = order === undefined ? ctx.sql`` : ctx.sql` ORDER BY ${order}`
  return ctx.isPostgres
    ? ctx.sql`(SELECT COALESCE(json_agg(${element}${by}), '[]'::json)::text FROM ${from})`
    : ctx.sql`(SELECT json_group_array(${element}${by}) FROM ${from})`
}
