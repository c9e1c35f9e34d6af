/**
 * PostgreSQL intention locks (docs/design/lock-order.md): the SQL every read-write transaction
 * on a `PgDatabase` client runs at `BEGIN`, and the key lock a nested write adds.
 * Lock ids are `hashtextextended(<text>, 0)` with the schema bound as a parameter:
 * schema lock `'baton:writer:' || schema`, key lock `'baton:key:' || schema || ':' || key`.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as ClientInfo from "./clientInfo.js"
import * as PgConnection from "./pgConnection.js"
import * as TransactionDriver from "./transactionDriver.js"

/** `$1` = schema, or NULL for the connection's `current_schema()`. @internal */
const schemaLockId = "hashtextextended('baton:writer:' || COALESCE($1::text, current_schema()), 0)"
const keyLockId = "hashtextextended('baton:key:' || COALESCE($1::text, current_schema()) || ':' || $2::text, 0)"

/** Exclusive schema lock (schema-wide writes, schema creation, ledger passes, drops). @internal */
export const schemaLockExclusiveSql = `SELECT pg_advisory_xact_lock(${schemaLockId})`
/** Shared schema lock (keyed writes). @internal */
export const schemaLockSharedSql = `SELECT pg_advisory_xact_lock_shared(${schemaLockId})`
/** Exclusive key lock. @internal */
export const keyLockSql = `SELECT pg_advisory_xact_lock(${keyLockId})`

/** @internal */
export interface PgTransactionOptions {
  /** The Baton schema; `undefined` uses each connection's `current_schema()`. */
  readonly schema: string | undefined
  /** `SET LOCAL lock_timeout` for read-write transactions, in milliseconds. */
  readonly lockTimeoutMs: number
  /** The sessions' `statement_timeout`, in milliseconds: no healthy answer takes longer. */
  readonly statementTimeoutMs: number
  readonly readOnly: boolean
}

/**
 * A PostgreSQL string literal for `text` (the rules of node-postgres'
 * `escapeLiteral`: quotes doubled, and an `E''` literal with doubled backslashes
 * when `text` has any), or `undefined` when `text` cannot be a literal (NUL).
 *
 * @internal
 */
export const literal = (text: string): string | undefined => {
  if (text.includes("\0")) return undefined
  const quoted = `'${text.replace(/'/g, "''").replace(/\\/g, "\\\\")}'`
  return text.includes("\\") ? ` E${quoted}` : quoted
}

/**
 * The statements that open a read-write transaction, as one simple-protocol query
 * (one round trip instead of four): `BEGIN`, `SET LOCAL lock_timeout`, then the
 * schema lock (exclusive for a schema-wide write, shared plus the key lock for a
 * keyed one). The schema and key go in as escaped literals; `undefined` when one
 * cannot (the caller then sends the statements one by one with parameters).
 *
 * @internal
 */
export const beginScript = (
  options: PgTransactionOptions,
  key: string | undefined
): string | undefined => {
  const schema = options.schema === undefined ? "NULL" : literal(options.schema)
  const keyText = key === undefined ? "NULL" : literal(key)
  if (schema === undefined || keyText === undefined) return undefined
  // Function replacements: a key may contain `$&` or `$'`, which string replacements expand.
  const bind = (statement: string) =>
    statement.replace("$1::text", () => `${schema}::text`).replace("$2::text", () => `${keyText}::text`)
  const locks = key === undefined
    ? bind(schemaLockExclusiveSql)
    : `${bind(schemaLockSharedSql)}; ${bind(keyLockSql)}`
  return `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '${
    Math.max(0, Math.floor(options.lockTimeoutMs))
  }ms'; ${locks}`
}

/**
 * Begin an outermost PostgreSQL transaction: read-only clients `REPEATABLE READ READ
 * ONLY` without locks; otherwise READ COMMITTED, `lock_timeout`, then the schema lock
 * (exclusive for a schema-wide write, shared plus the key lock for a keyed one), sent
 * in one round trip ({@link beginScript}). The statements and their order are those of
 * docs/design/lock-order.md; only the transport differs from one statement per round trip.
 *
 * @internal
 */
export const begin = (conn: Connection, options: PgTransactionOptions): Effect.Effect<void, SqlError> =>
  options.readOnly
    ? TransactionDriver.exec(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    : Effect.flatMap(FiberRef.get(TransactionDriver.currentLockKey), (key) => {
      const script = beginScript(options, key)
      if (script !== undefined) return TransactionDriver.exec(conn, script)
      return Effect.all([
        TransactionDriver.exec(conn, "BEGIN ISOLATION LEVEL READ COMMITTED"),
        TransactionDriver.exec(conn, `SET LOCAL lock_timeout = '${Math.max(0, Math.floor(options.lockTimeoutMs))}ms'`),
        key === undefined
          ? TransactionDriver.exec(conn, schemaLockExclusiveSql, [options.schema ?? null])
          : Effect.zipRight(
            TransactionDriver.exec(conn, schemaLockSharedSql, [options.schema ?? null]),
            TransactionDriver.exec(conn, keyLockSql, [options.schema ?? null, key])
          )
      ], { discard: true })
    })

/**
 * The PostgreSQL driver of 6.8 for `PgDatabase` clients: `begin` above, a plain
 * `ROLLBACK` (it also clears a transaction aborted by a lock timeout during `BEGIN`),
 * on connections guarded so that an interruption destroys the connection rather
 * than waiting on it (see `pgConnection.ts`). `onBrokenConnection` lets the layer
 * drop a connection whose rollback failed.
 *
 * @internal
 */
export const driver = (
  options: PgTransactionOptions,
  onBrokenConnection?: (conn: Connection, error: SqlError) => Effect.Effect<void>
): TransactionDriver.Driver => ({
  begin: (conn) => PgConnection.begin(conn, begin(conn, options)),
  rollback: (conn) => PgConnection.rollback(conn, TransactionDriver.exec(conn, "ROLLBACK")),
  rollbackSavepoint: (conn, id) =>
    PgConnection.rollbackSavepoint(
      conn,
      TransactionDriver.exec(conn, `ROLLBACK TO SAVEPOINT effect_sql_${id}`),
      Duration.millis(options.statementTimeoutMs + 1000)
    ),
  connection: PgConnection.guard,
  onBrokenConnection
})

/**
 * Install the PostgreSQL driver on a client and record its schema and read-only flag
 * (the writer's nested key locks and `Dialect.isReadOnly` read them).
 *
 * @internal
 */
export const installPg = (
  client: SqlClient.SqlClient,
  options: PgTransactionOptions,
  onBrokenConnection?: (conn: Connection, error: SqlError) => Effect.Effect<void>
): void => {
  TransactionDriver.install(client, driver(options, onBrokenConnection))
  ClientInfo.mark(client, { readOnly: options.readOnly, pgSchema: options.schema })
}

/**
 * Take the exclusive lock of `key` inside the current transaction (a nested keyed
 * write whose transaction does not hold the key yet). Released at the outermost
 * commit, or by rolling back the enclosing savepoint.
 *
 * @internal
 */
export const lockKey = (sql: SqlClient.SqlClient, key: string): Effect.Effect<void, SqlError> =>
  Effect.asVoid(sql.unsafe(keyLockSql, [ClientInfo.get(sql)?.pgSchema ?? null, key]))
