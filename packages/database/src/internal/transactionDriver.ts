/**
 * The transaction driver every layer of this package installs (docs/design/lock-order.md): it replaces
 * a client's `withTransaction`, so raw `sql.withTransaction`, the writer and the ledger
 * all begin, commit and roll back the same way. Built on upstream
 * `makeWithTransaction` with the process-wide `TransactionConnection` tag, keeping its
 * savepoint naming and the client's own connection mutex (`reserve`).
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Scope from "effect/Scope"

/**
 * The lock key of the write that is opening the outermost transaction; `undefined`
 * means schema-wide (also for a raw `sql.withTransaction`). The writer sets it only
 * around `withTransaction`, the PostgreSQL `begin` reads it.
 *
 * @internal
 */
export const currentLockKey: FiberRef.FiberRef<string | undefined> = FiberRef.unsafeMake<string | undefined>(
  undefined
)

/** @internal */
export interface Driver {
  /** Begin the outermost transaction (may read `currentLockKey`). */
  readonly begin: (conn: Connection) => Effect.Effect<void, SqlError>
  /**
   * Roll back the outermost transaction. Must succeed when there is no transaction to
   * roll back (a failed `BEGIN`), so the begin's own error reaches the writer.
   */
  readonly rollback: (conn: Connection) => Effect.Effect<void, SqlError>
  /**
   * Called when `COMMIT` failed and the follow-up `ROLLBACK` failed too: the
   * connection is unusable. Defaults to nothing.
   */
  readonly onBrokenConnection?: ((conn: Connection, error: SqlError) => Effect.Effect<void>) | undefined
  /** Wrap each connection a transaction reserves (every statement of it runs through the wrapper). */
  readonly connection?: ((conn: Connection) => Effect.Effect<Connection>) | undefined
  /** Roll back to a savepoint; defaults to `ROLLBACK TO SAVEPOINT`. */
  readonly rollbackSavepoint?: ((conn: Connection, id: number) => Effect.Effect<void, SqlError>) | undefined
}

/** Run one statement without parameters on the transaction's connection. @internal */
export const exec = (conn: Connection, sql: string, params: ReadonlyArray<unknown> = []) =>
  Effect.asVoid(conn.executeUnprepared(sql, params, undefined))

/**
 * Replace `client.withTransaction` with one driven by `driver`. Mutates `client` (the
 * layers build it just before), so every copy made later (`withoutTransforms`) agrees.
 *
 * @internal
 */
export const install = (client: SqlClient.SqlClient, driver: Driver): void => {
  const wrap = driver.connection ?? Effect.succeed
  const rollbackSavepoint = driver.rollbackSavepoint ??
    ((conn: Connection, id: number) => exec(conn, `ROLLBACK TO SAVEPOINT effect_sql_${id}`))
  const withTransaction = SqlClient.makeWithTransaction({
    transactionTag: SqlClient.TransactionConnection,
    spanAttributes: [],
    acquireConnection: Effect.flatMap(
      Scope.make(),
      (scope) =>
        Effect.flatMap(
          Scope.extend(client.reserve, scope),
          (conn) => Effect.map(wrap(conn), (wrapped) => [scope, wrapped] as const)
        )
    ),
    begin: driver.begin,
    savepoint: (conn, id) => exec(conn, `SAVEPOINT effect_sql_${id}`),
    // Upstream releases the connection without rolling back after a failed COMMIT and
    // SQLite keeps such a transaction open (deferred foreign keys), so roll back here.
    commit: (conn) =>
      exec(conn, "COMMIT").pipe(
        Effect.tapError((error) =>
          driver.rollback(conn).pipe(
            Effect.catchAll(() => driver.onBrokenConnection?.(conn, error) ?? Effect.void)
          )
        )
      ),
    rollback: driver.rollback,
    rollbackSavepoint
  })
  ;(client as { withTransaction: SqlClient.SqlClient["withTransaction"] }).withTransaction = withTransaction
}
