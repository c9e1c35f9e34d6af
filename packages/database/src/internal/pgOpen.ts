/**
 * The PostgreSQL open sequence as one scoped effect: options and
 * URL admission, the pool and its connect check, the client with the
 * intention-lock transaction driver, and the schema (created with its JSON
 * helper under the exclusive schema lock, or required to exist read-only).
 *
 * @internal
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Config, Duration, Effect, Option, Redacted, Scope } from "effect"
import { DatabaseOpenError } from "../DatabaseOpenError.js"
import * as Dialect from "../Dialect.js"
import * as DurableWriter from "../DurableWriter.js"
import { table as ledgerTable } from "../Migrations.js"
import * as IntentionLocks from "./intentionLocks.js"
import * as JsonValid from "./pgJsonValid.js"
import * as Options from "./options.js"
import * as PgConnection from "./pgConnection.js"
import { checkConnection, makePool } from "./pgPool.js"
import { invalidSchemaMessage, isRefusal, parsePgUrl, type PgTarget, schemaPattern } from "./pgUrl.js"

/** What the open needs of `PgDatabaseOptions`. */
export interface OpenOptions {
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
}

const missingUrl = new DatabaseOpenError({
  reason: "missing_url",
  target: "DATABASE_URL",
  message: "PostgreSQL connection URL missing: pass { url } or set DATABASE_URL"
})

/** `options.url`, else `DATABASE_URL` through Effect's `ConfigProvider`. */
const resolveUrl = (url: OpenOptions["url"]): Effect.Effect<string, DatabaseOpenError> => {
  if (url !== undefined) return Effect.succeed(Redacted.isRedacted(url) ? Redacted.value(url) : url)
  return Config.option(Config.redacted("DATABASE_URL")).pipe(
    Effect.mapError(() => missingUrl),
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(missingUrl),
      onSome: (value) => Effect.succeed(Redacted.value(value))
    })),
    Effect.filterOrFail((value) => value.length > 0, () => missingUrl)
  )
}

const positiveInt = (value: number | undefined, fallback: number): number =>
  value !== undefined && Number.isSafeInteger(value) && value >= 1 ? value : fallback

const millis = (input: Duration.DurationInput | undefined, fallback: Duration.DurationInput): number => {
  const ms = Math.ceil(Duration.toMillis(Duration.decode(input ?? fallback)))
  return Number.isFinite(ms) && ms >= 0 ? ms : Math.ceil(Duration.toMillis(Duration.decode(fallback)))
}

/** Admitted options, with the password kept inside `target`. */
export interface Admitted {
  readonly target: PgTarget
  readonly schema: string
  readonly readOnly: boolean
  readonly maxConnections: number
  readonly connectTimeoutMs: number
  readonly lockTimeoutMs: number
  readonly statementTimeoutMs: number
  readonly idleInTransactionTimeoutMs: number
  readonly keepAliveInitialDelayMs: number
  readonly applicationName: string
}

/** Validate options and URL without connecting. */
export const admit = (options: OpenOptions): Effect.Effect<Admitted, DatabaseOpenError> =>
  Effect.gen(function*() {
    const url: unknown = options.url
    const problem = url === undefined || typeof url === "string" || Redacted.isRedacted(url)
      ? Options.pgProblem(options as unknown as Record<string, unknown>)
      : { option: "url", message: "url: must be a string or a Redacted string" }
    if (problem !== undefined) {
      // No `DatabaseOpenError` reason names a bad option; `invalid_url` is the closest (the
      // connection configuration is unusable). The target names the option.
      return yield* new DatabaseOpenError({
        reason: "invalid_url",
        target: problem.option,
        message: `PgDatabase option ${problem.message}`
      })
    }
    const schema: unknown = options.schema ?? "baton"
    if (typeof schema !== "string" || !schemaPattern.test(schema)) {
      const shown = typeof schema === "string" ? schema : String(schema)
      return yield* new DatabaseOpenError({ reason: "invalid_schema", target: shown, message: invalidSchemaMessage(shown) })
    }
    const parsed = parsePgUrl(yield* resolveUrl(options.url))
    if (isRefusal(parsed)) {
      return yield* new DatabaseOpenError({ reason: parsed.reason, target: parsed.target, message: parsed.message })
    }
    return {
      target: parsed,
      schema,
      readOnly: options.readOnly ?? false,
      maxConnections: positiveInt(options.maxConnections, 10),
      connectTimeoutMs: Math.max(1, millis(options.connectTimeout, Duration.seconds(5))),
      lockTimeoutMs: millis(options.lockTimeout, Options.pgDefaults.lockTimeout),
      statementTimeoutMs: millis(options.statementTimeout, Options.pgDefaults.statementTimeout),
      idleInTransactionTimeoutMs: millis(options.idleInTransactionTimeout, Options.pgDefaults.idleInTransactionTimeout),
      keepAliveInitialDelayMs: millis(options.keepAliveInitialDelay, Options.pgDefaults.keepAliveInitialDelay),
      applicationName: options.applicationName ?? "baton"
    }
  })

/**
 * A connection whose `COMMIT` and follow-up `ROLLBACK` both failed is unusable:
 * destroying it makes the pool drop it on release.
 */
const dropConnection = (conn: Connection): Effect.Effect<void> => PgConnection.destroy(conn)

const schemaExists = (sql: SqlClient.SqlClient, schema: string) =>
  Effect.map(
    sql<{ readonly present: number }>`SELECT 1 AS present FROM pg_catalog.pg_namespace WHERE nspname = ${schema}`,
    (rows) => rows.length > 0
  )

class Foreign {
  readonly _tag = "Foreign"
}

const foreignError = (admitted: Admitted) =>
  new DatabaseOpenError({
    reason: "foreign_database",
    target: admitted.target.redacted,
    message:
      `schema "${admitted.schema}" already holds another application's tables (no ${ledgerTable} ledger); choose another schema`
  })

const setupFailed = (admitted: Admitted, error: DurableWriter.DatabaseError) =>
  new DatabaseOpenError({
    reason: "connect_failed",
    target: admitted.target.redacted,
    message: `cannot connect to PostgreSQL at ${admitted.target.host}:${admitted.target.port}/${admitted.target.database}: ` +
      `preparing schema "${admitted.schema}" failed (${error.code})`,
    cause: error
  })

/**
 * Read-write: one schema-wide write (exclusive schema lock, so concurrent
 * openers serialize) refuses a foreign schema before touching it, then creates
 * the schema and the JSON helper when absent. Read-only: the schema must exist.
 * Tables are listed in `current_schema()`, which the startup `search_path` pins
 * to the schema (and which is NULL, listing nothing, while it does not exist).
 */
const prepareSchema = (sql: SqlClient.SqlClient, admitted: Admitted): Effect.Effect<void, DatabaseOpenError> => {
  const { schema } = admitted
  const isForeign = (tables: ReadonlyArray<string>) => tables.length > 0 && !tables.includes(ledgerTable)
  if (admitted.readOnly) {
    return Effect.gen(function*() {
      if (!(yield* schemaExists(sql, schema))) {
        return yield* new DatabaseOpenError({
          reason: "not_found",
          target: admitted.target.redacted,
          message: `schema "${schema}" does not exist in ${admitted.target.redacted}; a read-only open never creates it`
        })
      }
      if (isForeign(yield* Dialect.tables(sql))) return yield* foreignError(admitted)
    }).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(setupFailed(admitted, DurableWriter.fromSqlError(error)))))
  }
  return DurableWriter.make(sql).write(
    Effect.gen(function*() {
      if (isForeign(yield* Dialect.tables(sql))) return yield* Effect.fail(new Foreign())
      yield* sql.unsafe(`CREATE SCHEMA IF NOT EXISTS "${schema}"`)
      yield* JsonValid.ensure(sql, schema)
    })
  ).pipe(
    Effect.mapError((error) => error instanceof Foreign ? foreignError(admitted) : setupFailed(admitted, error))
  )
}

/** Open the PostgreSQL client; the pool ends with the scope. */
export const openPg = (options: OpenOptions): Effect.Effect<SqlClient.SqlClient, DatabaseOpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const admitted = yield* admit(options)
    const connectTimeout = Duration.millis(admitted.connectTimeoutMs)
    const pool = yield* makePool({
      target: admitted.target,
      schema: admitted.schema,
      readOnly: admitted.readOnly,
      maxConnections: admitted.maxConnections,
      connectTimeout,
      applicationName: admitted.applicationName,
      statementTimeoutMs: admitted.statementTimeoutMs,
      idleInTransactionTimeoutMs: admitted.idleInTransactionTimeoutMs,
      keepAliveInitialDelayMs: admitted.keepAliveInitialDelayMs
    })
    yield* checkConnection(pool, admitted.target, connectTimeout)
    const sql = yield* PgClient.fromPool({ acquire: Effect.succeed(pool) }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.orDie
    )
    IntentionLocks.installPg(sql, {
      schema: admitted.schema,
      lockTimeoutMs: admitted.lockTimeoutMs,
      statementTimeoutMs: admitted.statementTimeoutMs,
      readOnly: admitted.readOnly
    }, dropConnection)
    yield* prepareSchema(sql, admitted)
    return sql as SqlClient.SqlClient
  })
