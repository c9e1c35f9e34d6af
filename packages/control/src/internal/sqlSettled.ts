/**
 * Settled numbers on PostgreSQL: a number of a sequence at or below which every row of its table that
 * will ever commit has committed (or rolled back), so a page cursor at or below it never skips a row.
 *
 * Run rows (`row_seq`, taken by `RunStore.create`), signal commands and plan rows take their numbers from
 * sequences, with no shared row, so two writes can commit out of number order. Every transaction that
 * took a number holds its table's write lock (taken before the `INSERT` evaluates `nextval`) until it
 * ends. So: read the sequence's last number first, then the transactions holding that lock, and wait
 * until those (only those) have ended. Transactions that start later take higher numbers. The wait is as
 * long as the longest write of the table in flight, usually a few milliseconds; writers never wait for a
 * reader.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type { Fragment } from "@effect/sql/Statement"
import { Duration, Effect } from "effect"
import type { PersistenceError } from "../ControlError.js"
import type { SqlContext } from "./sqlContext.js"
import { persist, persistenceError } from "./sqlContext.js"

/** How long a reader waits for writes in flight before it gives up. */
const patience = Duration.seconds(30)
const pollEvery = Duration.millis(2)

/**
 * The settled number of `sequence`, whose numbers `table`'s inserts take (PostgreSQL only; both names are
 * this package's constants, never input); fails `PersistenceError(operation)` after waiting too long.
 * `whenMissing` answers instead on a database whose migrations have not created the sequence yet (its
 * writers then still number in commit order).
 */
export const settledNumber = (
  ctx: SqlContext,
  operation: string,
  sequence: string,
  table: string,
  whenMissing?: Effect.Effect<number, SqlError>
): Effect.Effect<number, PersistenceError> =>
  Effect.gen(function*() {
    const { sql } = ctx
    const read = Effect.map(
      sql<{ readonly last: number | string; readonly called: boolean }>`SELECT last_value AS last,
        is_called AS called FROM ${sql.literal(sequence)}`,
      ([seq]) => ({ last: seq === undefined ? 0 : seq.called ? Number(seq.last) : Number(seq.last) - 1, waits: true })
    )
    const { last, waits } = yield* (whenMissing === undefined
      ? read
      : ctx.optional(read, Effect.map(whenMissing, (n) => ({ last: n, waits: false }))))
    if (!waits) return last
    yield* awaitEnded(ctx, operation, table, yield* writeHolders(ctx, table))
    return last
  }).pipe(persist(operation))

/**
 * The open transactions (virtual ids) of other sessions holding a write lock on `table` (PostgreSQL only;
 * `table` is this package's constant, never input), as a scalar subquery answering a JSON array (or NULL
 * for none). Evaluated after whatever it is correlated with, so a caller can read a sequence first.
 */
export const writeHoldersJson = (ctx: SqlContext, table: string, when: Fragment = ctx.sql`TRUE`): Fragment =>
  ctx.sql`(SELECT json_agg(DISTINCT l.virtualtransaction)::text FROM pg_locks l
    WHERE ${when} AND l.locktype = 'relation' AND l.relation = ${ctx.sql.literal(`'${table}'::regclass`)} AND l.granted
      AND l.pid <> pg_backend_pid()
      AND l.mode IN ('RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock'))`

const writeHolders = (ctx: SqlContext, table: string): Effect.Effect<ReadonlyArray<string>, SqlError> =>
  Effect.map(ctx.sql<{ readonly v: string | null }>`SELECT ${writeHoldersJson(ctx, table)} AS v`, (rows) => holdersOf(rows[0]?.v))

/** The holders a `writeHoldersJson` column answered. */
export const holdersOf = (json: string | null | undefined): ReadonlyArray<string> =>
  json === null || json === undefined ? [] : (JSON.parse(json) as ReadonlyArray<string>)

/**
 * Waits until every transaction of `open` (virtual ids, as `writeHoldersJson` answered them) has ended;
 * fails `PersistenceError(operation)` after 30 s.
 */
export const awaitEnded = (
  ctx: SqlContext,
  operation: string,
  table: string,
  open: ReadonlyArray<string>
): Effect.Effect<void, PersistenceError> =>
  Effect.gen(function*() {
    let pending = open
    const deadline = (yield* Effect.clockWith((c) => c.currentTimeMillis)) + Duration.toMillis(patience)
    while (pending.length > 0) {
      if ((yield* Effect.clockWith((c) => c.currentTimeMillis)) > deadline) {
        return yield* Effect.fail(persistenceError(operation, `a write of ${table} stayed open for more than 30 s`))
      }
      yield* Effect.sleep(pollEvery)
      pending = (yield* ctx.sql<{ readonly v: string }>`SELECT DISTINCT virtualtransaction AS v FROM pg_locks
        WHERE virtualtransaction IN ${ctx.sql.in(pending as Array<string>)}`).map((r) => r.v)
    }
  }).pipe(persist(operation))

/** The settled `row_seq` of run rows (PostgreSQL only). */
export const settledRowSeq = (ctx: SqlContext, operation: string): Effect.Effect<number, PersistenceError> =>
  settledNumber(ctx, operation, "flows_run_row_seq", "flows_runs")
