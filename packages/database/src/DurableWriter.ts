/**
 * The write boundary: every write to a Baton database is one `DurableWriter.write`,
 * one transaction, serialized per lock key, replayed on transient lock conflicts with
 * bounded jittered backoff, with failures normalized into `DatabaseError` codes and
 * after-commit hooks (docs/design/lock-order.md).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Classify from "./internal/classify.js"
import * as ClientInfo from "./internal/clientInfo.js"
import * as Gate from "./internal/gate.js"
import * as IntentionLocks from "./internal/intentionLocks.js"
import * as ManagedWrite from "./internal/managedWrite.js"
import * as RetryPolicy from "./internal/retryPolicy.js"
import * as TransactionDriver from "./internal/transactionDriver.js"

/**
 * Retry policy of a writer's outermost writes. `maxAttempts` must be a positive safe
 * integer, `baseDelayMs` and `maxDelayMs` non-negative finite numbers of milliseconds;
 * anything else is refused, never clamped (see {@link make} for how).
 *
 * @since 0.1.0
 * @category models
 */
export interface WriteRetryOptions {
  /** Total attempts including the first; default 10. */
  readonly maxAttempts?: number
  /** First backoff delay in milliseconds; default 50. */
  readonly baseDelayMs?: number
  /** Cap on one slept delay in milliseconds; default 10 000. */
  readonly maxDelayMs?: number
}

/**
 * Options of one write.
 *
 * @since 0.1.0
 * @category models
 */
export interface WriteOptions {
  /**
   * Lock key (docs/design/lock-order.md): one run's id, a lineage root's run id, …; 1..1024 UTF-16
   * code units, no U+0000, no unpaired surrogate. Absent: the write is schema-wide.
   */
  readonly key?: string
  /**
   * Inside an open managed write: `false` joins the enclosing transaction without a
   * savepoint (one round trip less). Meant for bodies of one statement, or whose
   * failure the caller never recovers from: if a joined body fails and the enclosing
   * write catches the failure and goes on to succeed, the enclosing transaction (or
   * savepoint) is rolled back and the write dies, because the joined body's partial
   * work could not be undone on its own. Ignored for an outermost write and when a raw
   * savepoint or raw transaction separates the write from the enclosing one (a savepoint
   * is used then). Default `true`.
   */
  readonly savepoint?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /**
   * Run `effect` as one transaction and commit it if it succeeds. Outermost writes wait
   * for the writer's in-process gate, then for the database lock (SQLite `BEGIN
   * IMMEDIATE`; PostgreSQL the schema lock, shared plus the key lock when `key` is
   * given), and are replayed on `busy`. A write inside an open transaction joins it as
   * a savepoint and never retries; concurrent nested writes of one transaction level
   * (e.g. `Effect.forEach(…, { concurrency })` in a body) run their savepoints one at
   * a time, so one must not wait for a sibling. Typed app errors pass through unchanged; every
   * `SqlError` leaves as `DatabaseError`. The body may be replayed: it may contain only
   * SQL and `afterCommit` registrations.
   */
  readonly write: <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    options?: WriteOptions
  ) => Effect.Effect<A, Exclude<E, SqlError> | DatabaseError, R>
  /**
   * Run `effect`, which sends exactly one statement, as a write of its own. On PostgreSQL,
   * outside a transaction, the statement goes out alone in autocommit: no `BEGIN`, no
   * session settings, no intention locks, one round trip; the statement's own row locks
   * must make it exact. On SQLite, and inside an open transaction (joined without a
   * savepoint, taking the key lock as `write(effect, { key, savepoint: false })` would),
   * it is that `write`. Replayed on `busy` like an outermost write (so `effect` may be
   * replayed); every `SqlError` leaves as `DatabaseError`.
   */
  readonly statement: <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    options?: { readonly key?: string }
  ) => Effect.Effect<A, Exclude<E, SqlError> | DatabaseError, R>
}

/**
 * The writer service.
 *
 * @since 0.1.0
 * @category services
 */
export class DurableWriter extends Context.Tag("@baton/database/DurableWriter")<DurableWriter, Service>() {}

/**
 * Stable database failure codes: callers branch on them, never on driver text.
 *
 * @since 0.1.0
 * @category errors
 */
export const DatabaseErrorCode = Schema.Literal(
  "busy",
  "constraint",
  "read_only",
  "corrupt",
  "full",
  "io",
  "schema",
  "unsupported",
  "unknown"
)

/**
 * @since 0.1.0
 * @category errors
 */
export type DatabaseErrorCode = typeof DatabaseErrorCode.Type

const messages: Readonly<Record<DatabaseErrorCode, string>> = {
  busy: "database busy: another writer holds the lock or a serialization conflict occurred",
  constraint: "the database refused the row: a constraint or data check failed",
  read_only: "the database is open read-only",
  corrupt: "the database file is damaged or not a database",
  full: "the database or disk is full",
  io: "database I/O or connection failure; the outcome of the last statement is unknown",
  schema: "the database lacks a table or column this code uses (run migrations?)",
  unsupported: "the driver result has no readable affected-row count",
  unknown: "database operation failed"
}

/**
 * A database failure with a stable `code`. `message` is a fixed sentence per code,
 * never SQL text or values; `cause` keeps the driver error (it may hold constraint
 * names or row values: publish `redact(error)`). Only `busy` is retryable.
 *
 * @since 0.1.0
 * @category errors
 */
export class DatabaseError extends Schema.TaggedError<DatabaseError>()("@baton/database/DatabaseError", {
  code: DatabaseErrorCode,
  cause: Schema.optional(Schema.Defect)
}) {
  /** Fixed sentence for the code. */
  override get message(): string {
    return messages[this.code]
  }
  /** `true` iff `code === "busy"`. */
  get retryable(): boolean {
    return this.code === "busy"
  }
}

/**
 * The code of any value: a `DatabaseError`'s code, or the driver error under an
 * `SqlError`, following `cause` chains (at most 16 links, cycle-safe). `undefined`
 * when the value carries no SQL provenance (no `SqlError` or `DatabaseError` in the
 * chain), even if its message mentions a lock.
 *
 * @since 0.1.0
 * @category classification
 */
export const codeOf = (error: unknown): DatabaseErrorCode | undefined => Classify.codeOf(error)

/**
 * `codeOf(error) === "busy"`.
 *
 * @since 0.1.0
 * @category classification
 */
export const isRetryable = (error: unknown): boolean => codeOf(error) === "busy"

/**
 * Normalize an `SqlError`: `new DatabaseError({ code: codeOf(e) ?? "unknown", cause: e })`.
 *
 * @since 0.1.0
 * @category classification
 */
export const fromSqlError = (error: SqlError): DatabaseError =>
  new DatabaseError({ code: codeOf(error) ?? "unknown", cause: error })

/**
 * The same code without its cause, for errors that leave the process.
 *
 * @since 0.1.0
 * @category classification
 */
export const redact = (error: DatabaseError): DatabaseError => new DatabaseError({ code: error.code })

const describeShape = (raw: unknown): string => {
  if (raw === null) return "null"
  if (Array.isArray(raw)) return `array(length ${raw.length})`
  if (typeof raw !== "object") return typeof raw
  let keys: Array<string> = []
  try {
    keys = Object.keys(raw).slice(0, 8)
  } catch {
    keys = []
  }
  return `object{${keys.join(",")}}`
}

const ownDataValue = (raw: object, name: string): { readonly found: boolean; readonly value?: unknown } => {
  try {
    const descriptor = Object.getOwnPropertyDescriptor(raw, name)
    if (descriptor === undefined || !("value" in descriptor)) return { found: false }
    return { found: true, value: descriptor.value }
  } catch {
    return { found: false }
  }
}

/**
 * The affected-row count of a raw driver result (use with `.raw`): an own data
 * property `changes` (better-sqlite3) or else `rowCount` (node-postgres), a
 * non-negative safe integer or in-range `bigint`. Accessors are never invoked.
 * Anything else fails with code `unsupported`, whose cause describes only the shape.
 *
 * @since 0.1.0
 * @category utils
 */
export const affectedRows = (raw: unknown): Effect.Effect<number, DatabaseError> =>
  Effect.suspend(() => {
    if (typeof raw === "object" && raw !== null && !Array.isArray(raw)) {
      for (const name of ["changes", "rowCount"]) {
        const { found, value } = ownDataValue(raw, name)
        if (!found) continue
        if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return Effect.succeed(value)
        if (typeof value === "bigint" && value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER)) {
          return Effect.succeed(Number(value))
        }
        break
      }
    }
    return Effect.fail(
      new DatabaseError({
        code: "unsupported",
        cause: new Error(`unreadable affected-row count in a driver result of shape ${describeShape(raw)}`)
      })
    )
  })

/**
 * Counts scheduled replays of outermost writes (not the final exhausted attempt).
 *
 * @since 0.1.0
 * @category metrics
 */
export const writeRetries: Metric.Metric.Counter<number> = Metric.counter("baton_db_write_retries", {
  description: "write transactions replayed after a busy failure"
})

/**
 * `true` when any SQL transaction (managed or raw) is open in this fiber.
 *
 * @since 0.1.0
 * @category transactions
 */
export const isInTransaction: Effect.Effect<boolean> = Effect.map(
  Effect.serviceOption(SqlClient.TransactionConnection),
  Option.isSome
)

const joinScope: FiberRef.FiberRef<boolean> = FiberRef.unsafeMake(false)

/**
 * Run `effect` so that every write it nests inside an open managed write joins that write without a
 * savepoint, as if each passed `savepoint: false` (a savepoint and its release are two statements per
 * nested write). For writes none of whose nested failures the body catches and recovers from: a
 * joined write that fails poisons the enclosing write, which then dies instead of committing
 * (`WriteOptions.savepoint`). An outermost write, and a write behind a raw savepoint, are unchanged.
 *
 * @since 0.3.0
 * @category transactions
 */
export const joinWithoutSavepoints = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, joinScope, true)

/**
 * Register `update` (short, non-failing, process-local) to run once after the
 * innermost managed write's outermost transaction commits. Answers `true` when
 * registered; `false` (nothing registered) outside a managed write, inside a raw
 * `sql.withTransaction` or raw savepoint, or when `client` names another database.
 * Registrations of a rolled-back savepoint or a replayed attempt are discarded.
 *
 * @since 0.1.0
 * @category transactions
 */
export const afterCommit = (update: Effect.Effect<void>, client?: SqlClient.SqlClient): Effect.Effect<boolean> =>
  Effect.contextWith((context) => {
    const frame = Context.getOption(context, ManagedWrite.ManagedWrite)
    const transaction = Context.getOption(context, SqlClient.TransactionConnection)
    if (Option.isNone(frame) || Option.isNone(transaction) || frame.value.closed || !frame.value.managed) return false
    const [conn, depth] = transaction.value
    if (conn !== frame.value.conn || depth !== frame.value.depth) return false
    if (client !== undefined && ClientInfo.databaseOf(client) !== frame.value.database) return false
    frame.value.hooks.push(update)
    return true
  })

const isSqlError = (u: unknown): u is SqlError =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "SqlError"

/** Every `SqlError` in the cause, failure or defect, leaves as a typed `DatabaseError`. */
const normalizeCause = <E>(cause: Cause.Cause<E>): Cause.Cause<Exclude<E, SqlError> | DatabaseError> =>
  Cause.match(cause, {
    onEmpty: Cause.empty,
    onFail: (error) => Cause.fail(isSqlError(error) ? fromSqlError(error) : error as Exclude<E, SqlError>),
    onDie: (defect) => isSqlError(defect) ? Cause.fail(fromSqlError(defect)) : Cause.die(defect),
    onInterrupt: (fiberId) => Cause.interrupt(fiberId),
    onSequential: (left, right) => Cause.sequential(left, right),
    onParallel: (left, right) => Cause.parallel(left, right)
  })

const runHooks = (hooks: ReadonlyArray<Effect.Effect<void>>): Effect.Effect<void> =>
  Effect.forEach(
    hooks,
    (hook) => Effect.catchAllCause(hook, (cause) => Effect.logError("DurableWriter: an after-commit hook failed", cause)),
    { discard: true }
  )

/**
 * Savepoints of one transaction level are a stack named by depth: a savepoint opened
 * while a sibling's is still open would be rolled back by (or take with it) the
 * sibling's rollback. Nested writes of one level therefore run one at a time.
 */
const savepointLocks = new WeakMap<object, Map<number, Effect.Semaphore>>()
const savepointLock = (transaction: readonly [unknown, number]): Effect.Semaphore => {
  const conn = transaction[0] as object
  let levels = savepointLocks.get(conn)
  if (levels === undefined) {
    levels = new Map()
    savepointLocks.set(conn, levels)
  }
  let lock = levels.get(transaction[1])
  if (lock === undefined) {
    lock = Effect.unsafeMakeSemaphore(1)
    levels.set(transaction[1], lock)
  }
  return lock
}

/**
 * A writer over `sql` with its own in-process gate. The serialization contract holds
 * for clients built by this package's layers (their transaction driver takes the
 * database locks); a bare client is plain `BEGIN`.
 *
 * Invalid `options` (see {@link WriteRetryOptions}) are a programming error:
 * `make` throws synchronously, so {@link layer} dies, with a message naming the
 * option and the rule (`DurableWriter options: maxAttempts: must be a positive
 * safe integer (got -1)`). `SqliteDatabase.layer` and `PgDatabase.layer` check
 * their `writer` options first and fail with a typed `DatabaseOpenError` instead.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (sql: SqlClient.SqlClient, options?: WriteRetryOptions): Service => {
  const policy = RetryPolicy.policyOf(options)
  const gate = Gate.make()
  const database = ClientInfo.databaseOf(sql)
  const postgres = sql.onDialectOrElse({ pg: () => true, orElse: () => false })

  const outermost = <A, E, R>(body: Effect.Effect<A, E, R>, key: string | undefined) => {
    const attempt = Effect.suspend(() => {
      const frame = ManagedWrite.make({
        database,
        parent: undefined,
        exclusive: postgres && key === undefined,
        managed: true
      })
      if (key !== undefined) frame.keys.add(key)
      const inner = Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) => {
        if (Option.isSome(transaction)) {
          frame.conn = transaction.value[0]
          frame.depth = transaction.value[1]
        }
        return ManagedWrite.refusePoisoned(frame, body)
      }).pipe(
        Effect.provideService(ManagedWrite.ManagedWrite, frame),
        Effect.locally(TransactionDriver.currentLockKey, undefined)
      )
      return sql.withTransaction(inner).pipe(
        Effect.locally(TransactionDriver.currentLockKey, key),
        Effect.map((value) => [value, frame.hooks] as const),
        Effect.ensuring(Effect.sync(() => {
          frame.closed = true
        }))
      )
    })
    const loop = (
      attemptNumber: number
    ): Effect.Effect<readonly [A, ReadonlyArray<Effect.Effect<void>>], E | SqlError, R> =>
      Effect.catchAllCause(attempt, (cause) =>
        attemptNumber < policy.maxAttempts && RetryPolicy.isRetryableCause(cause)
          ? Effect.flatMap(RetryPolicy.delayOf(policy, attemptNumber), (delay) =>
            Metric.increment(writeRetries).pipe(
              Effect.zipRight(Effect.sleep(Duration.millis(delay))),
              Effect.zipRight(loop(attemptNumber + 1))
            ))
          : Effect.failCause(cause))
    const readOnly = ClientInfo.isReadOnly(sql)
    const request = postgres && key !== undefined ? Gate.keyed(key) : Gate.exclusive
    return Effect.uninterruptibleMask((restore) => {
      // Read-only transactions take no database lock, so they take no permit either.
      const guarded = readOnly ? restore(loop(1)) : gate.withPermit(request, restore)(restore(loop(1)))
      return Effect.flatMap(guarded, ([value, hooks]) => Effect.as(runHooks(hooks), value))
    })
  }

  const nested = <A, E, R>(
    body: Effect.Effect<A, E, R>,
    key: string | undefined,
    transaction: readonly [unknown, number],
    savepoint: boolean
  ) =>
    Effect.contextWithEffect((context: Context.Context<never>) => {
      const enclosing = Option.getOrUndefined(Context.getOption(context, ManagedWrite.ManagedWrite))
      if (enclosing !== undefined && enclosing.closed) {
        return Effect.dieMessage("DurableWriter: write called from a fiber that outlived its transaction")
      }
      if (enclosing !== undefined && enclosing.database !== database) {
        return Effect.dieMessage(
          "DurableWriter: a write on one database was nested inside a write on another database"
        )
      }
      // A raw savepoint between the managed write and this one makes the parent
      // unmanaged at this level: its rollback could not discard our hooks.
      const parent = enclosing !== undefined && enclosing.conn === transaction[0] && enclosing.depth === transaction[1]
        ? enclosing
        : undefined
      const needsKeyLock = postgres && key !== undefined && !ClientInfo.isReadOnly(sql) &&
        !ManagedWrite.holdsKey(parent, key)
      if (!savepoint && parent !== undefined && parent.managed) {
        // Joined: the body runs in the enclosing frame; a failure poisons that frame.
        const locked = needsKeyLock
          ? Effect.zipRight(IntentionLocks.lockKey(sql, key), Effect.sync(() => parent.keys.add(key)))
          : Effect.void
        return Effect.zipRight(locked, body).pipe(
          Effect.onExit((exit) =>
            Exit.isFailure(exit)
              ? Effect.sync(() => {
                parent.poisoned = true
              })
              : Effect.void
          )
        )
      }
      const frame = ManagedWrite.make({ database, parent, exclusive: false, managed: parent?.managed === true })
      // Writes nested deeper see the key as held; it moves to the parent on success.
      if (needsKeyLock) frame.keys.add(key)
      const inner = Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (current) => {
        if (Option.isSome(current)) {
          frame.conn = current.value[0]
          frame.depth = current.value[1]
        }
        return ManagedWrite.refusePoisoned(
          frame,
          needsKeyLock ? Effect.zipRight(IntentionLocks.lockKey(sql, key), body) : body
        )
      }).pipe(Effect.provideService(ManagedWrite.ManagedWrite, frame))
      return savepointLock(transaction).withPermits(1)(
        sql.withTransaction(inner).pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              if (parent === undefined) return
              parent.hooks.push(...frame.hooks)
              if (needsKeyLock) parent.keys.add(key)
            })
          ),
          Effect.ensuring(Effect.sync(() => {
            frame.closed = true
          }))
        )
      )
    })

  const write = <A, E, R>(
    body: Effect.Effect<A, E, R>,
    options?: WriteOptions
  ): Effect.Effect<A, Exclude<E, SqlError> | DatabaseError, R> =>
    Effect.suspend(() => {
      const key = options?.key
      if (key !== undefined && !RetryPolicy.isValidKey(key)) return Effect.dieMessage("DurableWriter: invalid lock key")
      return Effect.flatMap(
        Effect.serviceOption(SqlClient.TransactionConnection),
        (transaction): Effect.Effect<A, E | SqlError, R> =>
          Option.isSome(transaction)
            ? Effect.flatMap(
              FiberRef.get(joinScope),
              (join) => nested(body, key, transaction.value, options?.savepoint !== false && !join)
            )
            : outermost(body, key)
      ).pipe(Effect.catchAllCause((cause) => Effect.failCause(normalizeCause(cause))))
    })

  const autocommit = <A, E, R>(body: Effect.Effect<A, E, R>, key: string | undefined) => {
    const loop = (attemptNumber: number): Effect.Effect<A, E | SqlError, R> =>
      Effect.catchAllCause(body, (cause) =>
        attemptNumber < policy.maxAttempts && RetryPolicy.isRetryableCause(cause)
          ? Effect.flatMap(RetryPolicy.delayOf(policy, attemptNumber), (delay) =>
            Metric.increment(writeRetries).pipe(
              Effect.zipRight(Effect.sleep(Duration.millis(delay))),
              Effect.zipRight(loop(attemptNumber + 1))
            ))
          : Effect.failCause(cause))
    if (ClientInfo.isReadOnly(sql)) return loop(1)
    const request = key !== undefined ? Gate.keyed(key) : Gate.exclusive
    return Effect.uninterruptibleMask((restore) => gate.withPermit(request, restore)(restore(loop(1))))
  }

  const statement = <A, E, R>(
    body: Effect.Effect<A, E, R>,
    options?: { readonly key?: string }
  ): Effect.Effect<A, Exclude<E, SqlError> | DatabaseError, R> =>
    Effect.suspend(() => {
      const key = options?.key
      if (key !== undefined && !RetryPolicy.isValidKey(key)) return Effect.dieMessage("DurableWriter: invalid lock key")
      return Effect.flatMap(
        Effect.serviceOption(SqlClient.TransactionConnection),
        (transaction): Effect.Effect<A, E | SqlError, R> =>
          Option.isSome(transaction)
            ? nested(body, key, transaction.value, false)
            : postgres
            ? autocommit(body, key)
            : outermost(body, key)
      ).pipe(Effect.catchAllCause((cause) => Effect.failCause(normalizeCause(cause))))
    })

  return DurableWriter.of({ write, statement })
}

/**
 * The writer over the context's `SqlClient`. Invalid `options` make the layer
 * die at build (a defect, as in {@link make}): its error channel is `never`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: WriteRetryOptions): Layer.Layer<DurableWriter, never, SqlClient.SqlClient> =>
  Layer.effect(DurableWriter, Effect.map(SqlClient.SqlClient, (sql) => make(sql, options)))
