/**
 * Queue control: every launched run is in a named queue (`"default"` unless started in another). A
 * queue can be paused (hosts claim none of its released runs; runs already running go on, and lapsed
 * leases of its runs are still taken over) and can carry a global concurrency limit (never more than
 * that many of its runs running across all hosts, checked inside each claim's write). `stats` counts a
 * queue's runs by state. SQL only: over `SqlClient` and `DurableWriter`.
 *
 * @since 0.2.0
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Effect, Layer } from "effect"
import { InvalidInput, PersistenceError } from "./ControlError.js"
import * as QueueSql from "./internal/queueSql.js"

/**
 * Queue names: 1 to 128 characters, `/^[a-z0-9][a-z0-9._\/-]{0,127}$/` (the rule of flow ids).
 *
 * @since 0.2.0
 * @category constants
 */
export const namePattern: RegExp = QueueSql.namePattern

/**
 * `ClaimLost.reason` of a claim refused because its run's queue is paused.
 *
 * @since 0.2.0
 * @category constants
 */
export const pausedReason: string = QueueSql.pausedReason

/**
 * `ClaimLost.reason` of a claim refused because its run's queue already runs its concurrency limit.
 *
 * @since 0.2.0
 * @category constants
 */
export const fullReason: string = QueueSql.fullReason

/**
 * The largest global concurrency limit `setConcurrency` accepts.
 *
 * @since 0.2.0
 * @category constants
 */
export const maxConcurrency = 1_000_000

/**
 * The PostgreSQL notification channel of new work: a start that leaves runs released for hosts to
 * claim notifies it in its transaction, with the schema's name as payload; hosts `LISTEN` and look for
 * work at once.
 *
 * @since 0.2.0
 * @category constants
 */
export const workChannel: string = QueueSql.workChannel

/**
 * A queue's settings: `paused`, and `concurrency` (its global limit, `null` for none).
 *
 * @since 0.2.0
 * @category models
 */
export interface Settings {
  readonly queue: string
  readonly paused: boolean
  readonly concurrency: number | null
}

/**
 * A queue's runs by state, as of one read: `available` (released and available now), `delayed`
 * (released, available later), `running` (owned, not terminal: what the limit counts), `failed`; with
 * the queue's settings. Counts are non-negative integers.
 *
 * @since 0.2.0
 * @category models
 */
export interface Stats extends Settings {
  readonly available: number
  readonly delayed: number
  readonly running: number
  readonly failed: number
}

/**
 * The queue operations. Writes check the queue name (and the limit) first: a bad one fails
 * `InvalidInput` naming the field (`queue`, `limit`) and writes nothing. Each write answers the queue's
 * settings after it; pausing a paused queue (and the like) is no error. Storage failures are
 * `PersistenceError`s naming the operation, never a stored value. On PostgreSQL a resume or a new
 * limit notifies `workChannel` as it commits, so listening hosts claim at once rather than at
 * their next sweep.
 *
 * @since 0.2.0
 * @category models
 */
export interface Service {
  /** Stop new claims of the queue's released runs; running runs are not touched. */
  readonly pause: (queue: string) => Effect.Effect<Settings, InvalidInput | PersistenceError>
  /** Let hosts claim the queue's runs again. */
  readonly resume: (queue: string) => Effect.Effect<Settings, InvalidInput | PersistenceError>
  /**
   * Set the queue's global concurrency limit: a safe integer 1..`maxConcurrency`, or `null` for none.
   * A limit below what runs now stops new claims until enough of them end; it interrupts none.
   */
  readonly setConcurrency: (queue: string, limit: number | null) => Effect.Effect<Settings, InvalidInput | PersistenceError>
  /** Every queue that has runs or settings, ordered by name. */
  readonly stats: () => Effect.Effect<ReadonlyArray<Stats>, PersistenceError>
}

/**
 * @since 0.2.0
 * @category services
 */
export class Queues extends Context.Tag("@baton/control/Queues")<Queues, Service>() {}

const persistence = (operation: string) => (error: unknown) =>
  new PersistenceError({ operation, message: `database error (${DurableWriter.codeOf(error) ?? "unknown"})`, cause: error })

interface SettingsRow {
  readonly queue: string
  readonly paused: number | string | boolean
  readonly concurrency: number | string | null
}

const toSettings = (row: SettingsRow): Settings => ({
  queue: row.queue,
  paused: Number(row.paused) === 1 || row.paused === true,
  concurrency: row.concurrency === null ? null : Number(row.concurrency)
})

/**
 * Build the service over the database in context.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient | DurableWriter.DurableWriter> = Effect.gen(
  function*() {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter

    const checkName = (queue: string) => {
      const issue = QueueSql.nameIssue("queue", queue)
      return issue === undefined ? Effect.void : Effect.fail(new InvalidInput({ issue }))
    }

    // One upsert: the row of a queue never configured is created with the defaults and `set` applied.
    const upsert = (operation: string, queue: string, set: { readonly paused?: 0 | 1; readonly concurrency?: number | null }) =>
      Effect.gen(function*() {
        yield* checkName(queue)
        const nowMs = yield* Clock.currentTimeMillis
        const paused = set.paused ?? 0
        const concurrency = set.concurrency ?? null
        const update = set.paused !== undefined
          ? sql`paused = ${set.paused}, updated_at_ms = ${nowMs}`
          : sql`concurrency = ${concurrency}, updated_at_ms = ${nowMs}`
        // A resume or a new limit may make runs claimable: hosts listening on PostgreSQL look at once.
        const mayFree = set.paused === 0 || set.concurrency !== undefined
        const notify = mayFree && sql.onDialectOrElse({ pg: () => true, orElse: () => false })
        const rows = yield* writer.write(
          Effect.gen(function*() {
            const rows = yield* sql<SettingsRow>`INSERT INTO control_queues (queue, paused, concurrency, updated_at_ms)
              VALUES (${queue}, ${paused}, ${concurrency}, ${nowMs})
              ON CONFLICT (queue) DO UPDATE SET ${update}
              RETURNING queue, paused, concurrency`
            if (notify) yield* sql`SELECT pg_notify(${QueueSql.workChannel}, current_schema())`
            return rows
          }),
          { key: `control_queues:${queue}` }
        ).pipe(Effect.mapError(persistence(operation)))
        return toSettings(rows[0]!)
      })

    const setConcurrency = (queue: string, limit: number | null) =>
      limit !== null && (!Number.isSafeInteger(limit) || limit < 1 || limit > maxConcurrency)
        ? Effect.zipRight(
          checkName(queue),
          Effect.fail(new InvalidInput({ issue: `limit: must be null or an integer between 1 and ${maxConcurrency}` }))
        )
        : upsert("set a queue's concurrency", queue, { concurrency: limit })

    const stats = () =>
      Effect.gen(function*() {
        const nowMs = yield* Clock.currentTimeMillis
        const counted = yield* sql<
          { queue: string; available: number | string; delayed: number | string; running: number | string; failed: number | string }
        >`SELECT cr.queue,
            SUM(CASE WHEN ${QueueSql.released(sql)} AND cr.available_at_ms <= ${nowMs} THEN 1 ELSE 0 END) AS available,
            SUM(CASE WHEN ${QueueSql.released(sql)} AND cr.available_at_ms > ${nowMs} THEN 1 ELSE 0 END) AS delayed,
            SUM(CASE WHEN r.status = 'running' THEN 1 ELSE 0 END) AS running,
            SUM(CASE WHEN r.status = 'failed' THEN 1 ELSE 0 END) AS failed
          FROM control_runs cr JOIN flows_runs r ON r.run_id = cr.run_id
          GROUP BY cr.queue`
        const settings = yield* sql<SettingsRow>`SELECT queue, paused, concurrency FROM control_queues`
        const byQueue = new Map<string, Stats>()
        for (const row of settings) {
          byQueue.set(row.queue, { ...toSettings(row), available: 0, delayed: 0, running: 0, failed: 0 })
        }
        for (const row of counted) {
          const known = byQueue.get(row.queue) ?? { queue: row.queue, paused: false, concurrency: null }
          byQueue.set(row.queue, {
            queue: row.queue,
            paused: known.paused,
            concurrency: known.concurrency,
            available: Number(row.available),
            delayed: Number(row.delayed),
            running: Number(row.running),
            failed: Number(row.failed)
          })
        }
        return [...byQueue.values()].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0))
      }).pipe(Effect.mapError(persistence("read queue stats")))

    return Queues.of({
      pause: (queue) => upsert("pause a queue", queue, { paused: 1 }),
      resume: (queue) => upsert("resume a queue", queue, { paused: 0 }),
      setConcurrency,
      stats
    })
  }
)

/**
 * The service over the database in context.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer: Layer.Layer<Queues, never, SqlClient.SqlClient | DurableWriter.DurableWriter> = Layer.effect(Queues, make)
