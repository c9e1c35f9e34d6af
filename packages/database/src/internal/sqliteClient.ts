/**
 * The SQLite side of the transaction driver, the client builder and the
 * connection pragmas shared by `TestDatabase.layer` and the file layer.
 *
 * @internal
 */
import type * as Reactivity from "@effect/experimental/Reactivity"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as ClientInfo from "./clientInfo.js"
import * as TransactionDriver from "./transactionDriver.js"

const noTransaction = "cannot rollback - no transaction is active"

const causeMessage = (error: SqlError): string => {
  const cause = error.cause
  return typeof cause === "object" && cause !== null && typeof (cause as { message?: unknown }).message === "string"
    ? (cause as { message: string }).message
    : ""
}

/**
 * The SQLite driver: `BEGIN IMMEDIATE` (read-only: deferred `BEGIN`), a rollback that
 * treats "no transaction is active" as done (after a busy `BEGIN`, so the typed busy
 * error reaches the retry instead of a defect), and a defect when a connection is
 * left inside a transaction it cannot end (the host must rebuild the layer).
 *
 * @internal
 */
export const driver = (options: { readonly readOnly: boolean }): TransactionDriver.Driver => ({
  begin: (conn) => TransactionDriver.exec(conn, options.readOnly ? "BEGIN" : "BEGIN IMMEDIATE"),
  rollback: (conn) =>
    TransactionDriver.exec(conn, "ROLLBACK").pipe(
      Effect.catchIf((error) => causeMessage(error).includes(noTransaction), () => Effect.void)
    ),
  onBrokenConnection: (_conn, error) =>
    Effect.die(new Error("SqliteDatabase: the connection is stuck in a transaction after a failed COMMIT", { cause: error }))
})

/**
 * Install the SQLite driver on `client` and record whether it is read-only (so
 * `Dialect.isReadOnly` and the writer see it). The file layer calls this on the client
 * it built.
 *
 * @internal
 */
export const installSqlite = (client: SqlClient.SqlClient, options: { readonly readOnly: boolean }): void => {
  TransactionDriver.install(client, driver(options))
  ClientInfo.mark(client, { readOnly: options.readOnly })
}

/**
 * Time-to-live of the driver's prepared-statement cache. The upstream cache keeps a
 * failed preparation as long as a good one (ten minutes by default), so a "no such
 * table" seen before another process migrated would stick; one second bounds that
 * window, and re-preparing a statement costs microseconds.
 *
 * @internal
 */
export const prepareCacheTTL: Duration.Duration = Duration.seconds(1)

/**
 * Build the `@effect/sql-sqlite-node` client with the driver installed. `filename`
 * may be `:memory:` (the test layer); the file layer validates paths before calling.
 *
 * @internal
 */
export const make = (
  options: SqliteClient.SqliteClientConfig
): Effect.Effect<SqliteClient.SqliteClient, never, Scope.Scope | Reactivity.Reactivity> =>
  Effect.map(SqliteClient.make({ prepareCacheTTL, ...options }), (client) => {
    installSqlite(client, { readOnly: options.readonly === true })
    return client
  })

/**
 * Busy timeout in whole milliseconds: default 0 read-write (a waiting writer backs off
 * through `DurableWriter` instead of blocking the event loop), 1 s read-only.
 *
 * @internal
 */
export const busyTimeoutMs = (busyTimeout: Duration.DurationInput | undefined, readOnly: boolean): number => {
  const input = busyTimeout ?? (readOnly ? Duration.seconds(1) : Duration.zero)
  const ms = Math.ceil(Duration.toMillis(Duration.decode(input)))
  return Number.isSafeInteger(ms) && ms > 0 ? Math.min(ms, 2_147_483_647) : 0
}

/**
 * The connection pragmas of every Baton SQLite client: busy timeout and foreign keys
 * on the client's one connection, read back so a driver that ignored the pragma cannot
 * go unnoticed. The driver's own busy timeout (5 s) would otherwise stay in force.
 *
 * @internal
 */
export const configure = (sql: SqlClient.SqlClient, busyMs: number): Effect.Effect<void, SqlError> =>
  Effect.gen(function*() {
    yield* sql.unsafe(`PRAGMA busy_timeout = ${busyMs}`)
    yield* sql.unsafe("PRAGMA foreign_keys = ON")
    const rows = yield* sql.unsafe<{ readonly foreign_keys: number }>("PRAGMA foreign_keys")
    if (rows[0]?.foreign_keys !== 1) return yield* Effect.dieMessage("SqliteDatabase: PRAGMA foreign_keys did not turn on")
  })
