/**
 * The database-anchored clock (docs/design/fencing-and-leases.md): wall time follows PostgreSQL's
 * `clock_timestamp()`, advanced between re-anchors on the underlying clock's
 * monotonic `currentTimeNanos`, and never moves backwards.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Duration, Effect } from "effect"

/** One server reading placed on the underlying monotonic time line. */
export interface Sample {
  /** Server epoch milliseconds. */
  readonly serverMs: number
  /** Underlying monotonic nanoseconds at the sample's midpoint. */
  readonly instant: bigint
  /** Round trip of the sample query, in nanoseconds. */
  readonly roundTrip: bigint
}

/**
 * Take one sample: monotonic time before and after
 * `SELECT floor(extract(epoch from clock_timestamp()) * 1000)`, run outside
 * any transaction (the transaction tag is removed so the statement checks out
 * its own connection).
 */
export const sample = (sql: SqlClient.SqlClient, underlying: Clock.Clock): Effect.Effect<Sample, SqlError> =>
  Effect.suspend(() => {
    const before = underlying.unsafeCurrentTimeNanos()
    return sql<{ readonly ms: number | string }>`SELECT floor(extract(epoch from clock_timestamp()) * 1000) AS ms`.pipe(
      Effect.map((rows) => {
        const after = underlying.unsafeCurrentTimeNanos()
        const serverMs = Number(rows[0]?.ms)
        if (!Number.isSafeInteger(serverMs)) throw new Error("database clock: unreadable clock_timestamp()")
        return { serverMs, instant: before + (after - before) / 2n, roundTrip: after - before }
      })
    )
  }).pipe(Effect.mapInputContext((context: Context.Context<never>) => Context.omit(SqlClient.TransactionConnection)(context)))

/**
 * A `Clock` whose wall time is `anchor.serverMs + elapsed monotonic time`,
 * floored and never lower than its previous reading; nanoseconds and sleeps
 * are the underlying clock's.
 */
export class AnchoredClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  private anchor: Sample
  private last = Number.NEGATIVE_INFINITY

  constructor(readonly underlying: Clock.Clock, anchor: Sample) {
    this.anchor = anchor
  }

  /** Move the anchor; readings keep their floor, so time never goes back. */
  reanchor(sample: Sample): void {
    this.anchor = sample
  }

  unsafeCurrentTimeMillis(): number {
    const elapsed = this.underlying.unsafeCurrentTimeNanos() - this.anchor.instant
    const reading = Math.floor(this.anchor.serverMs + Number(elapsed) / 1e6)
    if (reading > this.last) this.last = reading
    return this.last
  }

  readonly currentTimeMillis: Effect.Effect<number> = Effect.sync(() => this.unsafeCurrentTimeMillis())

  unsafeCurrentTimeNanos(): bigint {
    return this.underlying.unsafeCurrentTimeNanos()
  }

  get currentTimeNanos(): Effect.Effect<bigint> {
    return this.underlying.currentTimeNanos
  }

  sleep(duration: Duration.Duration): Effect.Effect<void> {
    return this.underlying.sleep(duration)
  }
}

/** The sample with the shortest round trip. */
export const best = (samples: ReadonlyArray<Sample>): Sample =>
  samples.reduce((a, b) => (b.roundTrip < a.roundTrip ? b : a))
