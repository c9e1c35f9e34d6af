/**
 * One ownership move: a conditional `UPDATE` of the run row whose `WHERE` is
 * the move's whole rule, and the ownership facts it states. The rule is
 * written once, as SQL, and both dialects run it:
 *
 * - PostgreSQL: one statement in autocommit. A materialized CTE locks the row
 *   (`FOR UPDATE`) and keeps it as it was, the update runs once the lock is
 *   held (re-checking its rule on the newest row version), the facts are
 *   appended by `flows_journal_append` only when the update took effect, and
 *   `clock_timestamp()` is read after the lock. A miss answers from the locked
 *   row, so naming the loss costs no second statement.
 * - SQLite: one `BEGIN IMMEDIATE` transaction: the same update, then the facts
 *   (two statements however many), or on a miss a read of the row to name the loss.
 */
import type { Fragment } from "@effect/sql/Statement"
import { Effect, Option } from "effect"
import * as Companion from "../Companion.js"
import * as Errors from "../errors.js"
import { type OwnerIdType, type RunSnapshot, RunStoreError } from "../model.js"
import * as ReferenceClock from "../ReferenceClock.js"
import * as Rows from "../rows.js"
import { lockRow, readingAdmitted, type StoreContext, statement, write } from "./context.js"

export interface Move {
  readonly method: string
  readonly runId: string
  /** The lease reading the move is bounded by (PostgreSQL checks it inside the statement); none for a transition. */
  readonly check?: ReferenceClock.ReadingCheck | undefined
  /** The `SET` list. */
  readonly set: Fragment
  /** The rule, over the row's own columns. */
  readonly rule: Fragment
  /** Facts stated when the move takes effect, in order. */
  readonly facts: ReadonlyArray<Companion.Fact>
}

/** `Moved`, or `Missed` with the row as the move found it (undefined when absent). */
export type Result =
  | { readonly _tag: "Moved" }
  | { readonly _tag: "Missed"; readonly row: Rows.ControlRow | undefined }

const moved: Result = { _tag: "Moved" }

export const run = (ctx: StoreContext, move: Move): Effect.Effect<Result, RunStoreError> =>
  ctx.isPostgres ? inOneStatement(ctx, move) : inOneTransaction(ctx, move)

const inOneTransaction = (ctx: StoreContext, move: Move) =>
  write(
    ctx,
    move.method,
    move.runId,
    Effect.gen(function*() {
      const updated = yield* ctx.sql`UPDATE flows_runs SET ${move.set}
        WHERE run_id = ${move.runId} AND ${move.rule} RETURNING run_id`
      if (updated.length === 0) return { _tag: "Missed", row: yield* lockRow(ctx, move.method, move.runId) } as Result
      const prepared = yield* Companion.prepare(move.runId, move.facts)
      if (Option.isSome(prepared)) yield* prepared.value.append
      return moved
    })
  )

const inOneStatement = (ctx: StoreContext, move: Move): Effect.Effect<Result, RunStoreError> =>
  Effect.gen(function*() {
    const prepared = yield* Companion.prepare(move.runId, move.facts).pipe(
      Effect.mapError((error) => Errors.fromFailure(move.method, error))
    )
    const admitted = move.check === undefined ? ctx.sql`` : ctx.sql`AND ${readingAdmitted(ctx, move.check.nowMs)}`
    const append = Option.match(prepared, {
      onNone: () => ctx.sql`NULL::bigint[]`,
      onSome: (p) => p.expression
    })
    const rows = yield* statement(
      ctx,
      move.method,
      move.runId,
      ctx.sql<Record<string, unknown>>`WITH locked AS MATERIALIZED (
        SELECT ${Rows.controlColumnList(ctx.sql)} FROM flows_runs WHERE run_id = ${move.runId} FOR UPDATE
      ), moved AS (
        UPDATE flows_runs SET ${move.set}
        WHERE run_id = ${move.runId} AND EXISTS (SELECT 1 FROM locked) AND ${move.rule} ${admitted}
        RETURNING run_id
      ), appended AS MATERIALIZED (SELECT ${append} AS appended FROM moved)
      SELECT locked.*, ${ctx.sql.literal(ReferenceClock.clockMillisSql)} AS reference_clock_ms,
        (SELECT count(*) FROM moved) AS moved_count, (SELECT appended FROM appended) AS appended
      FROM (SELECT 1) AS one LEFT JOIN locked ON true`
    )
    const first = rows[0] ?? {}
    if (Number(first.moved_count) > 0) {
      if (Option.isSome(prepared)) {
        yield* prepared.value.appended(first.appended).pipe(
          Effect.mapError((error) => Errors.fromFailure(move.method, error))
        )
      }
      return moved
    }
    if (move.check !== undefined) yield* ctx.clock.checkAgainst(move.check, Number(first.reference_clock_ms))
    if (first.run_id === null || first.run_id === undefined) return { _tag: "Missed", row: undefined } as Result
    const row = Rows.decode(move.method, move.runId, first, false)
    if (row instanceof RunStoreError) return yield* Effect.fail(row)
    return { _tag: "Missed", row } as Result
  })

/** SQL: the row's status, owner and stamp equal `expected` (NULL-equal). */
export const snapshotIs = (ctx: StoreContext, expected: RunSnapshot): Fragment =>
  ctx.sql`status = ${expected.status} AND heartbeat_at_ms IS NOT DISTINCT FROM ${expected.heartbeatAtMs} AND ${
    expected.owner === null ? ctx.sql`owner_host_id IS NULL` : Rows.ownerIs(ctx.sql, expected.owner)
  }`

/** SQL: a lease stamp strictly older than the stale cutoff at `nowMs` (NULL counts as stale). */
export const staleAt = (ctx: StoreContext, column: "heartbeat_at_ms" | "claimed_at_ms", nowMs: number): Fragment =>
  ctx.sql`(${ctx.sql.literal(column)} IS NULL OR ${ctx.sql.literal(column)} < ${nowMs - Rows.staleAfterMs})`

/** SET list: the claim columns hold `claimant` and its token. */
export const setClaim = (ctx: StoreContext, claimant: OwnerIdType, claimedAtMs: number): Fragment =>
  ctx.sql`claim_host_id = ${claimant.hostId}, claim_pid = ${claimant.pid}, claim_nonce = ${claimant.nonce},
    claimed_at_ms = ${claimedAtMs}`

/** SET list: the claim columns cleared. */
export const clearClaim = (ctx: StoreContext): Fragment =>
  ctx.sql`claim_host_id = NULL, claim_pid = NULL, claim_nonce = NULL, claimed_at_ms = NULL`

/** SET list: the activation — `owner` runs the row with generation `grantedAtMs`, stamped at `atMs`. */
export const installOwner = (ctx: StoreContext, owner: OwnerIdType, atMs: number, grantedAtMs: number): Fragment =>
  ctx.sql`status = 'running', started_at_ms = COALESCE(started_at_ms, ${atMs}), finished_at_ms = NULL,
    owner_host_id = ${owner.hostId}, owner_pid = ${owner.pid}, owner_nonce = ${owner.nonce},
    granted_at_ms = ${grantedAtMs}, heartbeat_at_ms = ${atMs}, ${clearClaim(ctx)}`
