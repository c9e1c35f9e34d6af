/**
 * `PgDatabase.layerClock`, the database-anchored clock (spec 10.3, check 36). The
 * underlying clock is a controllable wrapper of a real clock: its wall time can be
 * skewed or jump, its monotonic time can be frozen and stepped, and its sleeps are
 * counted (the resync fiber sleeps once per round, so a count proves a round ran).
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Layer, Logger } from "effect"
import { tcpProxy } from "./fixtures/pg.js"

const url = TestDatabase.postgresTestUrl("pg-database-clock")

class ControlledClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  readonly real = Clock.make()
  wallOffsetMs = 0
  frozenNanos: bigint | undefined = undefined
  sleeps = 0
  unsafeCurrentTimeMillis(): number {
    return this.real.unsafeCurrentTimeMillis() + this.wallOffsetMs
  }
  readonly currentTimeMillis = Effect.sync(() => this.unsafeCurrentTimeMillis())
  unsafeCurrentTimeNanos(): bigint {
    return this.frozenNanos ?? this.real.unsafeCurrentTimeNanos()
  }
  readonly currentTimeNanos = Effect.sync(() => this.unsafeCurrentTimeNanos())
  sleep(duration: Duration.Duration): Effect.Effect<void> {
    this.sleeps++
    return this.real.sleep(duration)
  }
  freeze(): void {
    this.frozenNanos = this.real.unsafeCurrentTimeNanos()
  }
  step(ms: number): void {
    this.frozenNanos = (this.frozenNanos ?? this.real.unsafeCurrentTimeNanos()) + BigInt(ms) * 1_000_000n
  }
}

const serverMs = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql<{ ms: number }>`SELECT floor(extract(epoch from clock_timestamp()) * 1000) AS ms`
).pipe(Effect.map((rows) => rows[0]!.ms))

/** Real-time wait that does not go through any Effect clock (and so is not counted). */
const realWait = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

/** Wait until the resync fiber has started `rounds` more rounds (each after finishing the previous one). */
const resyncRounds = (clock: ControlledClock, rounds: number) =>
  Effect.gen(function*() {
    const target = clock.sleeps + rounds
    for (let i = 0; i < 2000 && clock.sleeps < target; i++) yield* realWait(10)
    expect(clock.sleeps).toBeGreaterThanOrEqual(target)
  })

describe.skipIf(url === undefined)("PgDatabase.layerClock", () => {
  const pgUrl = url!
  const withClock = <A, E>(
    clock: ControlledClock,
    options: PgDatabase.DatabaseClockOptions,
    body: Effect.Effect<A, E, SqlClient.SqlClient | DurableWriter.DurableWriter>
  ) =>
    body.pipe(
      Effect.provide(Layer.provideMerge(PgDatabase.layerClock(options), TestDatabase.layerPostgres(pgUrl))),
      Effect.withClock(clock)
    )

  it.live("readings follow the server, not a host clock 40 s ahead, and keep advancing after it jumps back 60 s", () => {
    const clock = new ControlledClock()
    clock.wallOffsetMs = 40_000
    return withClock(
      clock,
      { resync: "50 millis" },
      Effect.gen(function*() {
        const first = yield* Clock.currentTimeMillis
        const server = yield* serverMs
        expect(clock.unsafeCurrentTimeMillis() - server).toBeGreaterThan(39_000)
        // Near the server, not 40 s off; the slack covers a loaded machine's delay between the two reads.
        expect(Math.abs(first - server)).toBeLessThan(10_000)
        clock.wallOffsetMs = -20_000
        yield* resyncRounds(clock, 2)
        yield* realWait(100)
        const second = yield* Clock.currentTimeMillis
        const serverLater = yield* serverMs
        expect(second).toBeGreaterThanOrEqual(first + 100)
        expect(Math.abs(second - serverLater)).toBeLessThan(10_000)
      })
    )
  })

  it.live("a re-anchor sample behind the last reading never makes a reading decrease", () => {
    const clock = new ControlledClock()
    clock.freeze()
    return withClock(
      clock,
      { resync: "20 millis" },
      Effect.gen(function*() {
        const first = yield* Clock.currentTimeMillis
        // The monotonic clock runs 10 s ahead of the server; readings follow it...
        clock.step(10_000)
        const ahead = yield* Clock.currentTimeMillis
        expect(ahead - first).toBeGreaterThanOrEqual(9_999)
        expect(ahead - first).toBeLessThanOrEqual(10_001)
        // ...until a re-anchor places the server's (earlier) time at this instant.
        yield* resyncRounds(clock, 2)
        expect(yield* Clock.currentTimeMillis).toBe(ahead)
        clock.step(100)
        // Re-anchored: anchored time is behind, so readings hold instead of going back
        // (without the re-anchor this would read ahead + 100).
        expect(yield* Clock.currentTimeMillis).toBe(ahead)
        clock.step(30_000)
        expect(yield* Clock.currentTimeMillis).toBeGreaterThan(ahead + 10_000)
      })
    )
  })

  it.live("with the server unreachable a resync keeps the anchor and logs once; building against it fails with DatabaseError", () =>
    Effect.gen(function*() {
      const clock = new ControlledClock()
      const logs: Array<string> = []
      const logger = Logger.make(({ message }) => {
        logs.push(JSON.stringify(message))
      })
      const sql = yield* SqlClient.SqlClient
      const schema = (yield* sql<{ name: string }>`SELECT current_schema() AS name`)[0]!.name
      const proxy = yield* Effect.promise(() => tcpProxy(pgUrl))
      const proxied = PgDatabase.layerClient({ url: proxy.url, schema, readOnly: true, connectTimeout: "2 seconds" })
      yield* Effect.gen(function*() {
        clock.freeze()
        const before = yield* Clock.currentTimeMillis
        yield* Effect.promise(() => proxy.close())
        yield* resyncRounds(clock, 4)
        expect(logs.filter((line) => line.includes("database clock sync failed"))).toHaveLength(1)
        clock.step(1_000)
        expect(yield* Clock.currentTimeMillis).toBe(before + 1_000)
        const rebuilt = yield* Layer.build(PgDatabase.layerClock()).pipe(Effect.scoped, Effect.exit)
        expect(Exit.isFailure(rebuilt)).toBe(true)
        if (Exit.isFailure(rebuilt)) {
          const failure = Cause.failureOption(rebuilt.cause)
          expect(failure._tag).toBe("Some")
          if (failure._tag === "Some") expect(failure.value).toBeInstanceOf(DurableWriter.DatabaseError)
        }
      }).pipe(
        Effect.provide(Layer.provideMerge(PgDatabase.layerClock({ resync: "20 millis" }), proxied)),
        Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
        Effect.withClock(clock)
      )
    }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl))))

  it.effect("over an SQLite client the layer dies with its defect", () =>
    Effect.gen(function*() {
      const exit = yield* Layer.build(Layer.provide(PgDatabase.layerClock(), TestDatabase.layer)).pipe(
        Effect.scoped,
        Effect.exit
      )
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      if (Exit.isFailure(exit)) {
        expect(String(Cause.squash(exit.cause))).toContain("PgDatabase.layerClock needs a PostgreSQL client")
      }
    }))
})
