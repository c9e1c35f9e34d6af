/**
 * What every run-store operation shares: the client, writer and strategy, the
 * keyed write with error mapping, the lease-reading bound, admission and row
 * locking.
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Consensus from "@baton/journal/Consensus"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import * as Boundary from "../Boundary.js"
import * as Errors from "../errors.js"
import { RunStoreError } from "../model.js"
import * as ReferenceClock from "../ReferenceClock.js"
import * as RowStrategy from "../rowStrategy.js"
import * as Rows from "../rows.js"
import * as SpanOutcome from "../SpanOutcome.js"

export interface StoreContext {
  readonly sql: SqlClient.SqlClient
  readonly writer: DurableWriter.Service
  /** The strategy the operations ask; over the row strategy, one that asks the database nothing. */
  readonly consensus: Consensus.Service
  /** The row is the lease record: the operations' own statements carry every lease predicate. */
  readonly rowLeases: boolean
  readonly isPostgres: boolean
  readonly clock: ReferenceClock.ReferenceClock
}

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const writer = yield* DurableWriter.DurableWriter
  const strategy = yield* Consensus.Consensus
  const rowLeases = RowStrategy.isRowStrategyOn(strategy, sql)
  const context: StoreContext = {
    sql,
    writer,
    consensus: rowLeases ? settled : strategy,
    rowLeases,
    isPostgres: Dialect.isPostgres(sql),
    clock: ReferenceClock.make(sql)
  }
  return context
})

/**
 * What the row strategy answers when the run store asks it from inside one of its
 * own writes. Each operation calls it only after deciding from the row it locked
 * (claim pending or not, owner, generation, staleness, evidence), which is what
 * the strategy's own statements would check, and then writes the row itself, so
 * a second statement on the same row would only repeat the decision.
 */
const settled: Consensus.Service = Consensus.make({
  claim: (_runId, _claimant, nowMs) => Effect.succeed(Consensus.Granted.make({ grantedAtMs: nowMs })),
  activate: () => Effect.succeed(Consensus.Activated.make({})),
  heartbeat: (_runId, _owner, nowMs) => Effect.succeed(Consensus.Renewed.make({ heartbeatAtMs: nowMs })),
  reconfirm: (_runId, _owner, nowMs) => Effect.succeed(Consensus.Renewed.make({ heartbeatAtMs: nowMs })),
  release: () => Effect.void,
  steal: (_runId, claimant, nowMs, evidence) =>
    Effect.succeed(
      Consensus.stealEvidenceValid(claimant, nowMs, evidence)
        ? Consensus.Granted.make({ grantedAtMs: nowMs })
        : Consensus.Rejected.make({ reason: "evidence_invalid" })
    ),
  recover: (_runId, staleClaimant, _grantedAtMs, observer, nowMs, evidence) =>
    Effect.succeed(
      Consensus.matchesEvidence(staleClaimant, observer, nowMs, evidence)
        ? Consensus.Recovered.make({})
        : Consensus.Rejected.make({ reason: "evidence_invalid" })
    ),
  guard: () => Effect.void
})

/** Runs an operation in span `RunStore.<method>`, counting its outcome on `counter`. */
export const operation = <A, R>(
  method: string,
  counting: SpanOutcome.Counting | undefined,
  effect: Effect.Effect<A, RunStoreError, R>
) => SpanOutcome.traced(`RunStore.${method}`, counting, effect)

/** Turns an admission result into a value or an `invalid_run` failure. */
export const admit = <A>(method: string, admitted: Boundary.Admitted<A>): Effect.Effect<A, RunStoreError> =>
  Boundary.isRefusal(admitted) ? Effect.fail(Errors.invalid(method, admitted)) : Effect.succeed(admitted.value)

/** One write keyed by `key`; every failure leaves as a `RunStoreError`. */
export const write = <A, E, R>(
  ctx: StoreContext,
  method: string,
  key: string,
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, RunStoreError, R> =>
  ctx.writer.write(body, { key }).pipe(Effect.mapError((error) => Errors.fromFailure(method, error)))

/**
 * One statement as its own write: on PostgreSQL outside a transaction it goes out
 * alone in autocommit (one round trip, no intention locks: the statement's row
 * lock makes it exact); inside one it joins. Every failure leaves as a `RunStoreError`.
 */
export const statement = <A, E, R>(
  ctx: StoreContext,
  method: string,
  key: string,
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, RunStoreError, R> =>
  ctx.writer.statement(body, { key }).pipe(Effect.mapError((error) => Errors.fromFailure(method, error)))

/** PostgreSQL: the run's control row (undefined when absent) and the database clock, read in one statement. */
export const readRowWithClock = (ctx: StoreContext, method: string, runId: string) =>
  Effect.flatMap(
    Effect.mapError(
      ctx.sql<Record<string, unknown>>`SELECT flows_runs.*, ${ctx.sql.literal(ReferenceClock.clockMillisSql)} AS reference_clock_ms
        FROM (SELECT 1) AS one LEFT JOIN (SELECT ${Rows.controlColumnList(ctx.sql)} FROM flows_runs WHERE run_id = ${runId})
        AS flows_runs ON true`,
      (error) => Errors.fromFailure(method, error)
    ),
    (rows) => {
      const first = rows[0]
      const clockMs = Number(first?.reference_clock_ms)
      if (first === undefined || first.run_id === null) return Effect.succeed({ row: undefined, clockMs })
      return Effect.map(decodeFirst(method, runId, rows), (row) => ({ row, clockMs }))
    }
  )

/** SQL: a lease reading `nowMs` does not lead the database clock by more than the skew allowance (PostgreSQL). */
export const readingAdmitted = (ctx: StoreContext, nowMs: number) =>
  ctx.sql`${nowMs} <= ${ctx.sql.literal(ReferenceClock.clockMillisSql)} + ${ReferenceClock.skewAllowanceMs}`

/**
 * A write whose `nowMs` is a lease reading: the reading is bounded by the
 * reference clock (before the write on SQLite, inside it on PostgreSQL), then
 * `preCheck` may answer without writing, then `body` runs with `locked`, the
 * effect that yields the run's control row locked for this write. On PostgreSQL
 * the row lock and the clock reading are one statement (`clock_timestamp()` read
 * once the lock is held), so `locked` is the row already read; on SQLite it is the
 * plain read inside the write transaction.
 */
export const leaseWrite = <A, E, R>(
  ctx: StoreContext,
  check: ReferenceClock.ReadingCheck,
  preCheck: Effect.Effect<Option.Option<A>, E, R> | undefined,
  body: (locked: Effect.Effect<Rows.ControlRow | undefined, RunStoreError | SqlError>) => Effect.Effect<A, E, R>
): Effect.Effect<A, RunStoreError, R> => {
  if (ctx.isPostgres) {
    const decide = (row: Rows.ControlRow | undefined) => {
      const run = body(Effect.succeed(row))
      return preCheck === undefined
        ? run
        : Effect.flatMap(preCheck, Option.match({ onNone: () => run, onSome: Effect.succeed }))
    }
    return write(ctx, check.method, check.runId, Effect.flatMap(lockRowWithClock(ctx, check), decide))
  }
  // SQLite: the reading was bounded at admission (`admitReading`); the pre-check is a plain read.
  const run = write(ctx, check.method, check.runId, body(lockRow(ctx, check.method, check.runId)))
  return preCheck === undefined
    ? run
    : Effect.flatMap(
      Effect.mapError(preCheck, (error) => Errors.fromFailure(check.method, error)),
      Option.match({ onNone: () => run, onSome: Effect.succeed })
    )
}

/**
 * PostgreSQL: lock the run row (`FOR UPDATE`) and read `clock_timestamp()` after the
 * lock is held, in one statement (the CTE is materialized, so the clock is projected
 * only once the lock was granted; the outer join yields the clock for a missing row
 * too); then bound the reading by that clock.
 */
const lockRowWithClock = (ctx: StoreContext, check: ReferenceClock.ReadingCheck) =>
  Effect.flatMap(
    ctx.sql<Record<string, unknown>>`WITH locked AS MATERIALIZED (
      SELECT ${Rows.controlColumnList(ctx.sql)} FROM flows_runs WHERE run_id = ${check.runId} FOR UPDATE
    ) SELECT locked.*, ${ctx.sql.literal(ReferenceClock.clockMillisSql)} AS reference_clock_ms
    FROM (SELECT 1) AS one LEFT JOIN locked ON true`,
    (rows) => {
      const first = rows[0]
      return Effect.zipRight(
        ctx.clock.checkAgainst(check, Number(first?.reference_clock_ms)),
        first === undefined || first.run_id === null ? Effect.succeed(undefined) : decodeFirst(check.method, check.runId, rows)
      )
    }
  )

/** Bounds a lease reading at its admission step (SQLite); a no-op on PostgreSQL, which checks inside the write. */
export const admitReading = (ctx: StoreContext, check: ReferenceClock.ReadingCheck) => ctx.clock.beforeWrite(check)

/** Reads the row's control columns, locking it on PostgreSQL (`FOR UPDATE`). */
export const lockRow = (ctx: StoreContext, method: string, runId: string) =>
  Effect.flatMap(
    ctx.sql`SELECT ${Rows.controlColumnList(ctx.sql)} FROM flows_runs WHERE run_id = ${runId} ${
      ctx.isPostgres ? ctx.sql.literal("FOR UPDATE") : ctx.sql.literal("")
    }`,
    (rows) => decodeFirst(method, runId, rows)
  )

/** Plain read of the row's control columns (no lock). */
export const readRow = (ctx: StoreContext, method: string, runId: string) =>
  Effect.flatMap(
    ctx.sql`SELECT ${Rows.controlColumnList(ctx.sql)} FROM flows_runs WHERE run_id = ${runId}`,
    (rows) => decodeFirst(method, runId, rows)
  )

const decodeFirst = (method: string, runId: string, rows: ReadonlyArray<unknown>) => {
  if (rows.length === 0) return Effect.succeed(undefined)
  const decoded = Rows.decode(method, runId, rows[0], false)
  return decoded instanceof RunStoreError ? Effect.fail(decoded) : Effect.succeed(decoded)
}

/** Does the row still exist? (Used to tell `NotFound` from `FenceLost`.) */
export const exists = (ctx: StoreContext, runId: string) =>
  Effect.map(ctx.sql`SELECT 1 AS present FROM flows_runs WHERE run_id = ${runId}`, (rows) => rows.length > 0)
