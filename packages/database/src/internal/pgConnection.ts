/**
 * The connection a PostgreSQL transaction runs on, guarded so that ending the
 * transaction by interruption never waits on a socket that may have gone
 * silent. Upstream interrupts a statement by sending `pg_cancel_backend` over
 * another pool connection (up to 5 s, over the same network) and the
 * transaction's `ROLLBACK` then waits, uninterruptibly, behind the unanswered
 * statement: forever when no packet comes back. Here, when the interruption
 * ends the whole transaction, the connection is destroyed at once instead; the
 * server rolls back when it sees the socket close, or when its
 * idle-in-transaction timeout ends the session, whichever comes first.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import * as Option from "effect/Option"

interface PgClientLike {
  end?: () => Promise<void>
  connection?: { stream?: { destroy?: () => void } }
}

const broken = new WeakSet<Connection>()
const clients = new WeakMap<Connection, PgClientLike>()

const clientOf = (conn: Connection): PgClientLike | undefined =>
  clients.get(conn) ?? (conn as { readonly pg?: PgClientLike }).pg

/**
 * Destroy the connection's socket now, without a goodbye the network might
 * never carry. Ending the client first marks it so the pool drops it on release.
 *
 * @internal
 */
export const destroy = (conn: Connection): Effect.Effect<void> =>
  Effect.sync(() => {
    broken.add(conn)
    const client = clientOf(conn)
    client?.end?.().catch(() => undefined)
    client?.connection?.stream?.destroy?.()
  })

/** Whether the connection was destroyed (its transaction is gone with it). @internal */
export const isBroken = (conn: Connection): boolean => broken.has(conn)

/**
 * `conn` guarded for the transaction the current fiber is opening. A statement
 * interrupted while that transaction ends with it (in the fiber that opened it,
 * or directly in the outermost transaction, which any failed statement aborts on
 * PostgreSQL anyway) is abandoned, its upstream cancellation left to finish in
 * the background, and the connection destroyed. A statement interrupted in
 * another fiber inside a savepoint (a nested write under its own timeout, whose
 * enclosing write goes on) is cancelled as upstream does, keeping the connection.
 *
 * @internal
 */
export const guard = (conn: Connection): Effect.Effect<Connection> =>
  Effect.fiberIdWith((owner) =>
    Effect.sync(() => {
      const guarded: Connection = {
        execute: (sql, params, transformRows) => statement(conn.execute(sql, params, transformRows)),
        executeRaw: (sql, params) => statement(conn.executeRaw(sql, params)),
        executeStream: (sql, params, transformRows) => conn.executeStream(sql, params, transformRows),
        executeValues: (sql, params) => statement(conn.executeValues(sql, params)),
        executeUnprepared: (sql, params, transformRows) => statement(conn.executeUnprepared(sql, params, transformRows))
      }
      const abandon = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
        Effect.onInterrupt(Effect.disconnect(effect), () => destroy(guarded))
      const statement = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
        Effect.withFiberRuntime((fiber) => {
          const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
          const depth = Option.isSome(transaction) ? transaction.value[1] : 0
          return depth === 0 || Equal.equals(fiber.id(), owner) ? abandon(effect) : effect
        })
      const client = clientOf(conn)
      if (client !== undefined) clients.set(guarded, client)
      return guarded
    })
  )

/**
 * Run `BEGIN` interruptibly: upstream's transaction frame runs it
 * uninterruptibly, which would leave a write stuck on a silent connection's
 * `BEGIN` (or waiting for another process's intention lock) beyond any
 * timeout. An interruption destroys the connection.
 *
 * @internal
 */
export const begin = <E>(conn: Connection, effect: Effect.Effect<void, E>): Effect.Effect<void, E> =>
  Effect.onInterrupt(Effect.interruptible(effect), () => destroy(conn))

/**
 * Run `ROLLBACK` so that an interruption, including the one that ended the
 * transaction and is still pending, destroys the connection instead of waiting
 * for an answer; on a destroyed connection it is skipped, because the server
 * rolls back without it.
 *
 * @internal
 */
export const rollback = <E>(conn: Connection, effect: Effect.Effect<void, E>): Effect.Effect<void, E> =>
  Effect.suspend(() => {
    if (isBroken(conn)) return Effect.void
    return Effect.interruptible(effect).pipe(
      Effect.onInterrupt(() => destroy(conn)),
      Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.void : Effect.failCause(cause))
    )
  })

/**
 * Run `ROLLBACK TO SAVEPOINT` (uninterruptible upstream, and the enclosing write
 * may go on) bounded by `bound`: a healthy server answers within its statement
 * timeout, so no answer by then means the connection is dead, and it is
 * destroyed. Skipped on a destroyed connection.
 *
 * @internal
 */
export const rollbackSavepoint = <E>(
  conn: Connection,
  effect: Effect.Effect<void, E>,
  bound: Duration.Duration
): Effect.Effect<void, E> =>
  Effect.suspend(() => {
    if (isBroken(conn)) return Effect.void
    return Effect.disconnect(effect).pipe(
      Effect.timeoutOption(bound),
      Effect.flatMap(Option.match({ onNone: () => destroy(conn), onSome: () => Effect.void }))
    )
  })
