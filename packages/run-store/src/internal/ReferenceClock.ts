/**
 * The lease-reading reference clock (docs/design/fencing-and-leases.md): Effect's `Clock` on SQLite, read
 * at admission; the database server's `clock_timestamp()` on PostgreSQL, read
 * inside the operation's own write right after its locks.
 */
import * as Dialect from "@baton/database/Dialect"
import * as Consensus from "@baton/journal/Consensus"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Duration, Effect } from "effect"
import * as Errors from "./errors.js"
import type { RunStoreError } from "./model.js"

/** How far a reading may lead the reference, in ms (10 s). */
export const skewAllowanceMs = Duration.toMillis(Consensus.heartbeatSkewAllowance)

export interface ReferenceClock {
  /** Checks a reading where this dialect checks it before the write (SQLite). */
  readonly beforeWrite: (check: ReadingCheck) => Effect.Effect<void, RunStoreError>
  /** Checks a reading against a database clock value already read (PostgreSQL, fused with a row lock). */
  readonly checkAgainst: (check: ReadingCheck, clockMs: number) => Effect.Effect<void, RunStoreError>
}

/** The database clock in whole ms (PostgreSQL), as a select-list expression. */
export const clockMillisSql = "floor(extract(epoch from clock_timestamp()) * 1000)::bigint"

export interface ReadingCheck {
  readonly method: string
  readonly runId: string
  readonly nowMs: number
  /** How the refusal names the reading (default `nowMs`, the caller's argument). */
  readonly field?: string
  readonly extra?: Readonly<Record<string, unknown>>
}

const refuseAhead = (check: ReadingCheck, clockMs: number, detail: string) =>
  check.nowMs > clockMs + skewAllowanceMs
    ? Effect.fail(
      Errors.invalid(
        check.method,
        {
          _tag: "Refusal",
          field: check.field ?? "nowMs",
          detail: `${check.field ?? "nowMs"} leads the ${detail} by more than ${skewAllowanceMs} ms`
        },
        { runId: check.runId, nowMs: check.nowMs, clockMs, ...check.extra, detail }
      )
    )
    : Effect.void

export const make = (sql: SqlClient.SqlClient): ReferenceClock => {
  if (Dialect.isPostgres(sql)) {
    return {
      beforeWrite: () => Effect.void,
      checkAgainst: (check, clockMs) => refuseAhead(check, clockMs, "database clock")
    }
  }
  return {
    beforeWrite: (check) =>
      Effect.flatMap(Clock.currentTimeMillis, (ms) => refuseAhead(check, Math.floor(ms), "effect clock")),
    checkAgainst: (check, clockMs) => refuseAhead(check, clockMs, "effect clock")
  }
}
