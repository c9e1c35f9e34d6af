/**
 * The execution-revision feed: which runs changed, in an order that never
 * passes a change whose transaction may still commit.
 *
 * Every committed insert, update or delete of a `flows_runs` row (except a
 * heartbeat-only update) leaves the run's latest change in `flows_run_changes`:
 * a revision number and whether the run was deleted. Writers of different runs
 * share no row, so revision numbers are not handed out in commit order on
 * PostgreSQL: a transaction can take revision n, stay open, and commit after
 * the one that took n + 1. The feed is therefore ordered by the writing
 * transaction's id first (then the revision) and only returns changes whose
 * transaction id is below the reader's snapshot horizon (`xmin`: every
 * transaction below it has ended). A change that commits later always sorts
 * after every cursor already handed out, so following the feed never skips
 * one. The cost: while any transaction of the database server older than a
 * change is open, that change is held back. On SQLite writes are serialized by
 * the database write lock, revisions are commit-ordered and nothing is held
 * back.
 *
 * @since 0.1.0
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Errors from "./internal/errors.js"
import type { RunStoreError } from "./internal/model.js"

/**
 * A position in the feed: the last change a page returned. `xid` is the
 * writing transaction's id as decimal text on PostgreSQL ("0" for changes
 * recorded before the feed existed, and always "0" on SQLite); `revision` is a
 * positive safe integer.
 *
 * @since 0.1.0
 * @category models
 */
export interface Cursor {
  readonly xid: string
  readonly revision: number
}

/**
 * One run's latest change.
 *
 * @since 0.1.0
 * @category models
 */
export interface Change {
  readonly runId: string
  readonly revision: number
  readonly deleted: boolean
  readonly cursor: Cursor
}

/**
 * A page of changes after a cursor, in feed order. `next` is the cursor to
 * pass for the following page (the last change's, or the given one when the
 * page is empty).
 *
 * @since 0.1.0
 * @category models
 */
export interface Page {
  readonly changes: ReadonlyArray<Change>
  readonly next: Cursor
}

/**
 * The start of the feed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start: Cursor = Object.freeze({ xid: "0", revision: 0 })

const isCursor = (cursor: unknown): cursor is Cursor =>
  typeof cursor === "object" && cursor !== null &&
  typeof (cursor as Cursor).xid === "string" && /^(0|[1-9][0-9]{0,19})$/.test((cursor as Cursor).xid) &&
  Number.isSafeInteger((cursor as Cursor).revision) && (cursor as Cursor).revision >= 0

interface Raw {
  readonly run_id: string
  readonly revision: number | string
  readonly deleted: number | string | boolean
  readonly xid: string | null
}

/**
 * Up to `limit` (1..10,000) changes after `after`, oldest first. Fails
 * `invalid_run` for a malformed cursor or limit, `persistence_failed` (or
 * `constraint`) when the database does.
 *
 * @since 0.1.0
 * @category reads
 */
export const page = (
  after: Cursor,
  limit: number
): Effect.Effect<Page, RunStoreError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    if (!isCursor(after)) {
      return yield* Effect.fail(Errors.invalid("changes", { _tag: "Refusal", field: "after", detail: "after: must be a cursor of this feed" }))
    }
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) {
      return yield* Effect.fail(Errors.invalid("changes", { _tag: "Refusal", field: "limit", detail: "limit: must be an integer from 1 to 10000" }))
    }
    const sql = yield* SqlClient.SqlClient
    const rows = yield* (Dialect.isPostgres(sql)
      ? sql<Raw>`SELECT run_id, revision, deleted, change_xid::text AS xid FROM flows_run_changes
          WHERE change_xid < pg_snapshot_xmin(pg_current_snapshot())
            AND (change_xid, revision) > (${after.xid}::xid8, ${after.revision})
          ORDER BY change_xid, revision LIMIT ${limit}`
      : sql<Raw>`SELECT run_id, revision, deleted, NULL AS xid FROM flows_run_changes
          WHERE revision > ${after.revision} ORDER BY revision LIMIT ${limit}`).pipe(
        Effect.mapError((e) => Errors.fromFailure("changes", e))
      )
    const changes = rows.map((r): Change => {
      const revision = Number(r.revision)
      return {
        runId: r.run_id,
        revision,
        deleted: Number(r.deleted) === 1 || r.deleted === true,
        cursor: { xid: r.xid ?? "0", revision }
      }
    })
    return { changes, next: changes.at(-1)?.cursor ?? after }
  })
