/**
 * Control's numbers (signal commands, run messages, resume delegations, plan ids, plan rows, launches)
 * without a row that writers of different runs share.
 *
 * PostgreSQL: one sequence per number, created by migration `0003_sequences`; `nextval` never waits,
 * and a number whose write rolls back is a gap, never reused. Numbers are therefore not handed out in
 * commit order across runs. Per-run readers (steers, delivered signals, a run's delegation) still see
 * them in commit order, because every write of a run's rows holds that run's key lock, so the next number
 * of the run is taken after the previous write committed. Readers that page across runs (pending signal
 * commands, plan ids) bound themselves by {@link settled}.
 *
 * SQLite: every write holds the file's write lock, so for signal commands, run messages and plan rows
 * (rows never deleted) one above the highest number recorded is taken in commit order; the
 * `control_sequences` value from before is the floor, and is never written again for these. Plan ids
 * (taken in a write of their own, before the plan row exists), run numbers (run ids must never repeat,
 * even for a run whose launch index row is gone) and resume numbers (their rows are deleted when a
 * delegation is cleared) cannot be derived from rows, so on SQLite they keep their `control_sequences`
 * counter row: with one writer per file, that row adds no wait.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"
import type { PersistenceError } from "../ControlError.js"
import type { SqlContext } from "./sqlContext.js"
import { persistenceError } from "./sqlContext.js"
import { settledNumber } from "./sqlSettled.js"

/** A control number, named as in `control_sequences`. */
export type Name = "signal" | "message" | "resume" | "plan" | "plan_row" | "run"

/** Where a number lives: its PostgreSQL sequence, and on SQLite the table column it is derived from. */
interface Source {
  readonly sequence: string
  readonly rows?: { readonly table: string; readonly column: string }
}

/** Every number's source; the migration creates one sequence per entry. */
export const sources: { readonly [K in Name]: Source } = {
  signal: { sequence: "control_signal_seq", rows: { table: "control_signal_commands", column: "seq" } },
  message: { sequence: "control_message_seq", rows: { table: "control_run_messages", column: "seq" } },
  resume: { sequence: "control_resume_seq", rows: { table: "control_run_resumes", column: "requested_seq" } },
  plan: { sequence: "control_plan_seq" },
  plan_row: { sequence: "control_plan_row_seq", rows: { table: "control_plans", column: "row_seq" } },
  run: { sequence: "control_run_seq", rows: { table: "control_runs", column: "created_seq" } }
}

/** SQLite numbers kept in their counter row (see the module comment). */
const counted: ReadonlySet<Name> = new Set(["plan", "run", "resume"])

const maxSafe = 9007199254740991

/** SQLite: the `control_sequences` counter, as before the sequences. */
const counter = (ctx: SqlContext, name: Name) =>
  Effect.gen(function*() {
    const { sql } = ctx
    yield* sql`INSERT INTO control_sequences (name, value) VALUES (${name}, 0) ON CONFLICT (name) DO NOTHING`
    const rows = yield* sql<{ value: number | string }>`UPDATE control_sequences SET value = value + 1
      WHERE name = ${name} AND value < ${maxSafe} RETURNING value`
    const value = Number(rows[0]?.value)
    if (!Number.isSafeInteger(value) || value <= 0) {
      return yield* Effect.fail(persistenceError("allocate a sequence", `sequence ${name} is exhausted`))
    }
    return value
  })

/** The SQL expression of the next number, or `undefined` for a number SQLite counts. */
const expression = (ctx: SqlContext, name: Name): Fragment | undefined => {
  const source = sources[name]
  if (ctx.isPostgres) return ctx.sql.literal(`nextval('${source.sequence}')`)
  if (counted.has(name) || source.rows === undefined) return undefined
  const { table, column } = source.rows
  return ctx.sql.literal(`(SELECT CASE WHEN MAX(m) < ${maxSafe} THEN MAX(m) + 1 END FROM (
    SELECT MAX(${column}) AS m FROM ${table}
    UNION ALL SELECT value FROM control_sequences WHERE name = '${name}' UNION ALL SELECT 0) AS floor)`)
}

/**
 * The next number of `name` as a SQL value for the inserting statement: `nextval` on PostgreSQL, so the
 * statement takes its table's write lock before the number exists (what {@link settled} relies on); on
 * SQLite one above the highest row and the frozen counter (NULL past 2^53 - 1, which the NOT NULL column
 * refuses), or the counter's next value for the numbers SQLite still counts.
 */
export const value = (ctx: SqlContext, name: Name): Effect.Effect<Fragment, SqlError | PersistenceError> => {
  const fragment = expression(ctx, name)
  return fragment === undefined ? Effect.map(counter(ctx, name), (n) => ctx.sql`${n}`) : Effect.succeed(fragment)
}

/**
 * Take the next number of `name` on its own (for a number needed before its row is written). On SQLite
 * run it inside the write that inserts the row (or, for a counted number, any write).
 */
export const next = (ctx: SqlContext, name: Name): Effect.Effect<number, SqlError | PersistenceError> => {
  const fragment = expression(ctx, name)
  if (fragment === undefined) return counter(ctx, name)
  return Effect.gen(function*() {
    const [row] = yield* ctx.sql<{ readonly v: number | string | null }>`SELECT ${fragment} AS v`
    const n = Number(row?.v ?? Number.NaN)
    if (!Number.isSafeInteger(n) || n <= 0) {
      return yield* Effect.fail(persistenceError("allocate a sequence", `sequence ${name} is exhausted`))
    }
    return n
  })
}

/**
 * PostgreSQL: a number of `name` at or below which every row that will ever commit has committed, so a
 * cursor at or below it never passes a row that commits later (fails `PersistenceError(operation)` after
 * waiting too long for writes in flight). Before migration `0003_sequences` the rows were numbered from
 * the locked counter row, in commit order, so the highest committed one is settled.
 */
export const settled = (ctx: SqlContext, operation: string, name: "signal" | "plan_row"): Effect.Effect<number, PersistenceError> => {
  const { sequence, rows } = sources[name]
  const highest = Effect.map(
    ctx.sql<{ readonly m: number | string | null }>`SELECT MAX(${ctx.sql(rows!.column)}) AS m FROM ${ctx.sql(rows!.table)}`,
    ([row]) => Number(row?.m ?? 0)
  )
  return settledNumber(ctx, operation, sequence, rows!.table, highest)
}

/**
 * Take `count` numbers of `name` at once, ascending (for a batch of rows needed before they are
 * written): one `nextval` per number in one statement on PostgreSQL; on SQLite, inside the write, the
 * counter moved by `count` in one statement for a counted number.
 */
export const nextMany = (ctx: SqlContext, name: Name, count: number): Effect.Effect<ReadonlyArray<number>, SqlError | PersistenceError> =>
  Effect.gen(function*() {
    if (count <= 0) return []
    if (ctx.isPostgres) {
      const rows = yield* ctx.sql<{ readonly v: number | string }>`SELECT nextval(${sources[name].sequence}::regclass) AS v
        FROM generate_series(1, ${count}::int) ORDER BY 1`
      const values = rows.map((r) => Number(r.v))
      if (values.length !== count || !values.every((n) => Number.isSafeInteger(n) && n > 0)) {
        return yield* Effect.fail(persistenceError("allocate a sequence", `sequence ${name} is exhausted`))
      }
      return values
    }
    if (!counted.has(name)) return yield* Effect.forEach(Array.from({ length: count }), () => next(ctx, name))
    const { sql } = ctx
    yield* sql`INSERT INTO control_sequences (name, value) VALUES (${name}, 0) ON CONFLICT (name) DO NOTHING`
    const rows = yield* sql<{ value: number | string }>`UPDATE control_sequences SET value = value + ${count}
      WHERE name = ${name} AND value <= ${maxSafe - count} RETURNING value`
    const last = Number(rows[0]?.value)
    if (!Number.isSafeInteger(last) || last < count) {
      return yield* Effect.fail(persistenceError("allocate a sequence", `sequence ${name} is exhausted`))
    }
    return Array.from({ length: count }, (_, i) => last - count + 1 + i)
  })
