/**
 * Queue SQL shared by host discovery, the claim gate and `Queues`: what a released run is, queue names,
 * and the check a claim makes of its run's queue (pause flag, global concurrency limit) inside the
 * claiming write.
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"
import { ClaimLost } from "../ControlError.js"

/** Queue names: like flow ids, 1 to 128 characters. */
export const namePattern = /^[a-z0-9][a-z0-9._/-]{0,127}$/

/** The issue of a bad queue name (`field: rule`), or `undefined`. */
export const nameIssue = (field: string, value: unknown): string | undefined =>
  typeof value === "string" && namePattern.test(value)
    ? undefined
    : `${field}: must be 1 to 128 characters matching /^[a-z0-9][a-z0-9._\\/-]{0,127}$/`

/** The PostgreSQL channel a start notifies (payload: the schema) when it leaves runs for hosts to claim. */
export const workChannel = "baton_work"

/** `ClaimLost.reason` of a claim refused because the run's queue is paused. */
export const pausedReason = "QueuePaused"

/** `ClaimLost.reason` of a claim refused because the run's queue runs its limit already. */
export const fullReason = "QueueFull"

/** The summary's status member of `flows_runs r`, as the projection reads it. */
const summaryStatus = (sql: SqlClient.SqlClient): Fragment =>
  Dialect.isPostgres(sql)
    ? Dialect.jsonText(sql, sql`r.state_json`, "$.status")
    : sql`(CASE WHEN ${Dialect.jsonValid(sql, sql`r.state_json`)} THEN ${Dialect.jsonText(sql, sql`r.state_json`, "$.status")} END)`

/**
 * A released run of `flows_runs r`: launched and waiting for a host (suspended without a wait or a
 * claim, its summary `accepted`), whatever its availability.
 */
export const released = (sql: SqlClient.SqlClient): Fragment =>
  sql`(r.status = 'suspended' AND r.waiting_reason IS NULL AND r.claim_host_id IS NULL AND ${summaryStatus(sql)} = 'accepted')`

/** Runs of a queue that count against its limit: owned and not terminal (`flows_runs.status` running). */
export const runningOf = (sql: SqlClient.SqlClient, queue: string) =>
  sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM control_runs cr JOIN flows_runs r ON r.run_id = cr.run_id
    WHERE cr.queue = ${queue} AND r.status = 'running'`

/**
 * The check a claim of `runId` makes inside its write, before the claim: a paused queue refuses a
 * `fresh` claim (new work, not a parked run waking) with `ClaimLost(QueuePaused)`; a queue with a
 * concurrency limit refuses any claim once that many of its runs are running, `ClaimLost(QueueFull)`.
 * Atomic with the claim: SQLite's write holds the database's write lock from `BEGIN IMMEDIATE`; on
 * PostgreSQL the queue's row is locked (`FOR UPDATE`) before counting, so claims of one limited queue
 * take turns, and the count (a statement after the lock, so a snapshot after the previous claimant's
 * commit) sees every claim before it. Unlimited queues take no lock. A run with no launch row has no
 * queue and passes.
 */
export const claimGate = (
  sql: SqlClient.SqlClient,
  runId: string,
  fresh: boolean
): Effect.Effect<void, ClaimLost | SqlError> =>
  Effect.gen(function*() {
    const rows = yield* sql<{ queue: string; paused: number | boolean | null; concurrency: number | string | null }>`
      SELECT cr.queue, q.paused, q.concurrency FROM control_runs cr LEFT JOIN control_queues q ON q.queue = cr.queue
      WHERE cr.run_id = ${runId}`
    const row = rows[0]
    if (row === undefined) return
    let paused = Number(row.paused ?? 0) === 1
    let limit = row.concurrency === null ? undefined : Number(row.concurrency)
    if (limit !== undefined && Dialect.isPostgres(sql)) {
      // Read again under the lock: the row may have changed since the read above.
      const locked = yield* sql<{ paused: number | string; concurrency: number | string | null }>`
        SELECT paused, concurrency FROM control_queues WHERE queue = ${row.queue} FOR UPDATE`
      paused = Number(locked[0]?.paused ?? 0) === 1
      limit = locked[0]?.concurrency === null || locked[0] === undefined ? undefined : Number(locked[0].concurrency)
    }
    if (fresh && paused) return yield* Effect.fail(new ClaimLost({ runId, reason: pausedReason }))
    if (limit === undefined) return
    const running = Number((yield* runningOf(sql, row.queue))[0]?.n ?? 0)
    if (running >= limit) return yield* Effect.fail(new ClaimLost({ runId, reason: fullReason }))
  })
