/**
 * PostgreSQL as Baton's database: a node-postgres pool pinned to one schema,
 * write transactions serialized by intention locks (docs/design/lock-order.md), and the
 * database-anchored clock hosts read on PostgreSQL (docs/design/fencing-and-leases.md). Node only.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Layer, type Redacted } from "effect"
import type { DatabaseOpenError } from "./DatabaseOpenError.js"
import * as Dialect from "./Dialect.js"
import * as DurableWriter from "./DurableWriter.js"
import { AnchoredClock, best, sample } from "./internal/pgClock.js"
import { openPg } from "./internal/pgOpen.js"

/**
 * Options of a PostgreSQL database.
 *
 * - `url`: `postgres://` or `postgresql://` URL; default `DATABASE_URL` read through
 *   Effect's `ConfigProvider`. Query parameters (e.g. `sslmode`) pass to node-postgres.
 *   Errors and messages show it with the password replaced by `***`.
 * - `schema`: the schema holding every Baton table, `/^[a-z_][a-z0-9_]{0,62}$/`;
 *   default `"baton"`. A read-write open creates it.
 * - `readOnly`: sessions are read-only, nothing is created, writes fail `read_only`.
 * - `maxConnections`: pool size, default 10.
 * - `connectTimeout`: for each new connection and the initial check, default 5 seconds.
 * - `lockTimeout`: how long one write transaction waits for an intention lock before
 *   failing `busy` (then replayed by the writer), default 10 seconds.
 * - `statementTimeout`: the server cancels any one statement running longer
 *   (`statement_timeout` of every session), default 15 seconds; longer than `lockTimeout`.
 * - `idleInTransactionTimeout`: the server ends a session that sits idle inside a
 *   transaction this long (`idle_in_transaction_session_timeout`), releasing its row and
 *   intention locks, e.g. when its host went silent mid-write; default 10 seconds. A
 *   write's body must not pause this long between statements.
 * - `keepAliveInitialDelay`: TCP keepalive on every connection, first probe after this
 *   much idle time, default 5 seconds.
 * - `applicationName`: reported to the server, default `"baton"`.
 * - `writer`: retry options of the layer's `DurableWriter`.
 *
 * The session defaults stay below the 30 seconds after which a run's owner counts as
 * stale, so the locks of a host that went silent are released before another host
 * may take its runs over. Interrupting a write (e.g. `Effect.timeout`) whose statement
 * gets no answer returns at once: the connection is destroyed rather than waited on,
 * and the server rolls the transaction back.
 *
 * Options of the wrong type or range (`maxConnections` not a positive safe integer,
 * `connectTimeout` not a positive finite duration, `lockTimeout`, `statementTimeout`,
 * `idleInTransactionTimeout` or `keepAliveInitialDelay` not a positive finite duration
 * of at most 2147483647 milliseconds, `lockTimeout` not shorter than `statementTimeout`,
 * a non-string `applicationName` or `url`, bad `writer` options) fail the open, before any
 * connection, with `invalid_url` (the closest reason of `DatabaseOpenReason`),
 * `target` the option's name and a message naming the option and the rule, e.g.
 * `PgDatabase option maxConnections: must be a positive safe integer (got -1)`.
 *
 * @since 0.1.0
 * @category models
 */
export interface PgDatabaseOptions {
  readonly url?: string | Redacted.Redacted<string>
  readonly schema?: string
  readonly readOnly?: boolean
  readonly maxConnections?: number
  readonly connectTimeout?: Duration.DurationInput
  readonly lockTimeout?: Duration.DurationInput
  readonly statementTimeout?: Duration.DurationInput
  readonly idleInTransactionTimeout?: Duration.DurationInput
  readonly keepAliveInitialDelay?: Duration.DurationInput
  readonly applicationName?: string
  readonly writer?: DurableWriter.WriteRetryOptions
}

/**
 * The `SqlClient` over one PostgreSQL schema, without a writer. Fails with
 * `DatabaseOpenError`: `missing_url`, `invalid_url`, `wrong_dialect`,
 * `invalid_schema`, `connect_failed` (names host, port and database, never the
 * password), `not_found` (read-only, schema missing) or `foreign_database`
 * (the schema holds tables but no `flows_migrations` ledger). Closing the
 * scope ends the pool.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient = (options: PgDatabaseOptions = {}): Layer.Layer<SqlClient.SqlClient, DatabaseOpenError> =>
  Layer.scoped(SqlClient.SqlClient, openPg(options))

/**
 * The `SqlClient` over one PostgreSQL schema plus a `DurableWriter` on it (with
 * `options.writer`). Refusals as in {@link layerClient}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PgDatabaseOptions = {}
): Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, DatabaseOpenError> =>
  Layer.provideMerge(
    Layer.effect(
      DurableWriter.DurableWriter,
      Effect.map(SqlClient.SqlClient, (sql) => DurableWriter.make(sql, options.writer))
    ),
    layerClient(options)
  )

/**
 * Options of {@link layerClock}.
 *
 * - `resync`: re-anchor period, default 15 seconds.
 * - `maxRoundTrip`: a re-anchor sample whose round trip exceeds this is discarded,
 *   default 1 second.
 *
 * @since 0.1.0
 * @category models
 */
export interface DatabaseClockOptions {
  readonly resync?: Duration.DurationInput
  readonly maxRoundTrip?: Duration.DurationInput
}

/**
 * Install a `Clock` whose `currentTimeMillis` follows the PostgreSQL server's
 * `clock_timestamp()` (so all hosts share one lease clock), for everything built after it and programs
 * the composed layer is provided to. It anchors on the best of three samples,
 * advances on the underlying clock's monotonic `currentTimeNanos` (which,
 * with `sleep`, stays the underlying clock's), re-anchors every `resync`, and
 * never returns a lower reading than before. A failing sample at build fails
 * the layer with its `DatabaseError`; a failing resync keeps the anchor and
 * logs a warning once per outage. Over a non-PostgreSQL client it dies with
 * `PgDatabase.layerClock needs a PostgreSQL client`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClock = (
  options: DatabaseClockOptions = {}
): Layer.Layer<never, DurableWriter.DatabaseError, SqlClient.SqlClient> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (!Dialect.isPostgres(sql)) return yield* Effect.dieMessage("PgDatabase.layerClock needs a PostgreSQL client")
    const underlying = yield* Effect.clock
    const take = sample(sql, underlying).pipe(Effect.mapError(DurableWriter.fromSqlError))
    const clock = new AnchoredClock(underlying, best(yield* Effect.all([take, take, take])))
    const resync = Duration.decode(options.resync ?? Duration.seconds(15))
    const maxRoundTrip = Duration.toNanos(Duration.decode(options.maxRoundTrip ?? Duration.seconds(1)))
    let failing = false
    const resample = take.pipe(
      Effect.tap((next) =>
        Effect.sync(() => {
          failing = false
          // A slow round trip makes a poor anchor; keep the old one.
          if (maxRoundTrip._tag === "None" || next.roundTrip <= maxRoundTrip.value) clock.reanchor(next)
        })
      ),
      Effect.catchAll((error) =>
        failing ? Effect.void : Effect.zipRight(
          Effect.sync(() => (failing = true)),
          Effect.logWarning("database clock sync failed").pipe(Effect.annotateLogs({ code: error.code }))
        )
      )
    )
    yield* resample.pipe(
      Effect.delay(resync),
      Effect.forever,
      Effect.withClock(underlying),
      Effect.forkScoped
    )
    yield* Effect.withClockScoped(clock)
  }))
