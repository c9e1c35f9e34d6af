/**
 * PostgreSQL intention locks across hosts (checks 27, 28, 31, 32, 33): every "host"
 * is its own `PgDatabase.layer` (its own pool) on one schema. Ordering is proven by
 * what a transaction reads (READ COMMITTED: each statement sees what committed before
 * it), never by timing.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Duration, Effect, Fiber, Layer, Metric, Redacted, Schedule, Scope } from "effect"
import { counterSet } from "./fixtures/counterSet.js"
import { rawQuery } from "./fixtures/pg.js"

const url = TestDatabase.postgresTestUrl("pg-database-concurrency")

type Host = Context.Context<SqlClient.SqlClient | DurableWriter.DurableWriter>

const retries = Effect.map(Metric.value(DurableWriter.writeRetries), (state) => state.count)

/** Read the counter, wait, write read + 1; returns what it read. */
const slowIncrement = (ms: number, table = "counter") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe<{ value: number }>(`SELECT value FROM ${table} WHERE id = 1`)
    const value = Number(rows[0]!.value)
    yield* Effect.sleep(ms)
    yield* sql.unsafe(`UPDATE ${table} SET value = $1 WHERE id = 1`, [value + 1])
    return value
  })

const insertMark = (who: string) => Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO marks (who) VALUES (${who})`)

const countMarks = (who: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*) AS n FROM marks WHERE who = ${who}`).pipe(
    Effect.map((rows) => rows[0]!.n)
  )

const readCounter = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ value: number }>`SELECT value FROM counter`).pipe(
  Effect.map((rows) => rows[0]!.value)
)

/** Wait for `deferred`, failing loudly instead of hanging if the locks serialized. */
const awaitOrFail = <A>(deferred: Deferred.Deferred<A>, what: string) =>
  Deferred.await(deferred).pipe(
    Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error(`timed out waiting until ${what}`) })
  )

/** Poll until a session of `applicationName` waits for an advisory lock (20 s cap). */
const lockWaiter = (pgUrl: string, applicationName: string) =>
  Effect.promise(() =>
    rawQuery(
      pgUrl,
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = $1`,
      [applicationName]
    )
  ).pipe(
    Effect.flatMap((rows) => rows[0]?.n > 0 ? Effect.void : Effect.fail("none" as const)),
    Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 1000 }),
    Effect.orDieWith(() => new Error(`no ${applicationName} session ever waited for a lock`))
  )

const write = <A, E, R>(host: Host, body: Effect.Effect<A, E, R>, options?: DurableWriter.WriteOptions) =>
  Effect.flatMap(DurableWriter.DurableWriter, (writer) => writer.write(body, options)).pipe(Effect.provide(host))

describe.skipIf(url === undefined)("PgDatabase intention locks", () => {
  const pgUrl = url!

  /** A fresh schema with the counter and a marks table, and two extra hosts on it. */
  const withHosts = <A, E>(
    test: (hosts: { readonly h1: Host; readonly h2: Host; readonly schema: string }) => Effect.Effect<A, E, Scope.Scope>,
    options: { readonly lockTimeout?: Duration.DurationInput } = {}
  ) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      yield* Migrations.run([counterSet])
      yield* writer.write(sql`CREATE TABLE marks (who TEXT NOT NULL)`)
      const schema = (yield* sql<{ name: string }>`SELECT current_schema() AS name`)[0]!.name
      const h1 = yield* Layer.build(PgDatabase.layer({ url: pgUrl, schema, applicationName: `h1_${schema}` }))
      const h2 = yield* Layer.build(
        PgDatabase.layer({
          url: pgUrl,
          schema,
          applicationName: `h2_${schema}`,
          ...(options.lockTimeout ? { lockTimeout: options.lockTimeout } : {})
        })
      )
      return yield* test({ h1, h2, schema })
    }).pipe(Effect.scoped, Effect.provide(TestDatabase.layerPostgres(pgUrl)))

  it.live("two hosts' concurrent schema-wide read-then-increment writes serialize; bare @effect/sql-pg loses one (check 27)", () =>
    withHosts(({ h1, h2, schema }) =>
      Effect.gen(function*() {
        const reads = yield* Effect.all([write(h1, slowIncrement(200)), write(h2, slowIncrement(200))], {
          concurrency: "unbounded"
        })
        expect(reads.slice().sort()).toEqual([0, 1])
        expect(yield* Effect.provide(readCounter, h1)).toBe(2)
        // Control: plain upstream transactions (READ COMMITTED, no locks) lose an update.
        const bare = () => Layer.build(PgClient.layer({ url: Redacted.make(pgUrl) }))
        const b1 = yield* bare()
        const b2 = yield* bare()
        const table = `"${schema}".counter`
        // Both read before either writes (a barrier, possible only because nothing locks).
        const bothRead = yield* Effect.makeLatch(false)
        let bareReadCount = 0
        const bareIncrement = (client: Context.Context<SqlClient.SqlClient>) =>
          Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql.withTransaction(Effect.gen(function*() {
              const value = Number((yield* sql.unsafe<{ value: number }>(`SELECT value FROM ${table} WHERE id = 1`))[0]!.value)
              if (++bareReadCount === 2) yield* bothRead.open
              yield* bothRead.await
              yield* sql.unsafe(`UPDATE ${table} SET value = $1 WHERE id = 1`, [value + 1])
              return value
            }))).pipe(Effect.provide(client))
        const bareReads = yield* Effect.all([bareIncrement(b1), bareIncrement(b2)], { concurrency: "unbounded" })
        expect(bareReads).toEqual([2, 2])
        expect(yield* Effect.provide(readCounter, h1)).toBe(3)
      })
    ))

  it.live("a write waiting past lockTimeout fails with a lock timeout, is replayed and commits after the holder (check 28)", () =>
    withHosts(({ h1, h2 }) =>
      Effect.gen(function*() {
        const before = yield* retries
        const holding = yield* Deferred.make<void>()
        const holder = yield* write(
          h1,
          Effect.gen(function*() {
            yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE counter SET value = 100 WHERE id = 1`)
            yield* Deferred.succeed(holding, undefined)
            // Hold the schema lock until the waiter's attempt timed out and was replayed.
            yield* retries.pipe(
              Effect.filterOrFail((count) => count > before),
              Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 1000 })
            )
          })
        ).pipe(Effect.fork)
        yield* Deferred.await(holding)
        const read = yield* write(h2, slowIncrement(0))
        yield* Fiber.join(holder)
        expect(read).toBe(100)
        expect(yield* Effect.provide(readCounter, h1)).toBe(101)
        expect((yield* retries) - before).toBeGreaterThanOrEqual(1)
      }), { lockTimeout: "100 millis" }))

  const keyedOverlap = (h1: Host, h2: Host) =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const r2Committed = yield* Deferred.make<void>()
      const first = yield* write(
        h1,
        Effect.gen(function*() {
          yield* insertMark("r1")
          yield* Deferred.succeed(started, undefined)
          // r1's transaction stays open until r2's write has committed: if the locks
          // serialized them this would never happen.
          yield* awaitOrFail(r2Committed, "r2 committed")
          return yield* countMarks("r2")
        }),
        { key: "r1" }
      ).pipe(Effect.fork)
      yield* Deferred.await(started)
      yield* write(h2, insertMark("r2"), { key: "r2" })
      yield* Deferred.succeed(r2Committed, undefined)
      const r2SeenByOpenR1 = yield* Fiber.join(first)
      expect(r2SeenByOpenR1).toBe(1)
      yield* Effect.provide(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DELETE FROM marks`), h1)
    })

  it.live("writes on different keys overlap: r2 commits while r1's transaction is open, across hosts and in one host (check 31)", () =>
    withHosts(({ h1, h2 }) =>
      Effect.gen(function*() {
        yield* keyedOverlap(h1, h2)
        yield* keyedOverlap(h1, h1)
      })
    ))

  it.live("writes on the same key serialize (counter 2, the later read the earlier) (check 32)", () =>
    withHosts(({ h1, h2 }) =>
      Effect.gen(function*() {
        const reads = yield* Effect.all([
          write(h1, slowIncrement(200), { key: "r1" }),
          write(h2, slowIncrement(200), { key: "r1" })
        ], { concurrency: "unbounded" })
        expect(reads.slice().sort()).toEqual([0, 1])
        expect(yield* Effect.provide(readCounter, h1)).toBe(2)
      })
    ))

  const laterSeesEarlier = (
    h1: Host,
    h2: Host,
    h2Name: string,
    firstKey: DurableWriter.WriteOptions,
    secondKey: DurableWriter.WriteOptions
  ) =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const first = yield* write(
        h1,
        Effect.gen(function*() {
          yield* Deferred.succeed(started, undefined)
          yield* awaitOrFail(release, "released")
          yield* insertMark("first")
        }),
        firstKey
      ).pipe(Effect.fork)
      yield* Deferred.await(started)
      const second = yield* write(h2, countMarks("first"), secondKey).pipe(Effect.fork)
      // The second write is blocked on a lock while the first is open...
      yield* lockWaiter(pgUrl, h2Name)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      // ...and its first statement sees the first write's last insert.
      const seen = yield* Fiber.join(second)
      expect(seen).toBe(1)
      yield* Effect.provide(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DELETE FROM marks`), h1)
    })

  it.live("a schema-wide write waits for an open keyed write, and a keyed write for an open schema-wide one (check 32)", () =>
    withHosts(({ h1, h2, schema }) =>
      Effect.gen(function*() {
        yield* laterSeesEarlier(h1, h2, `h2_${schema}`, { key: "r1" }, {})
        yield* laterSeesEarlier(h1, h2, `h2_${schema}`, {}, { key: "r1" })
      })
    ))

  it.live("opposite nested key orders deadlock once; the victim is replayed and both commit (check 33)", () =>
    withHosts(({ h1, h2 }) =>
      Effect.gen(function*() {
        const before = yield* retries
        let attempts = 0
        let holdingOuter = 0
        const bothHoldOuter = yield* Effect.makeLatch(false)
        const nested = (host: Host, outer: string, inner: string) =>
          write(
            host,
            Effect.gen(function*() {
              attempts++
              const writer = yield* DurableWriter.DurableWriter
              yield* insertMark(`${outer}-outer`)
              // First attempts: each holds its outer key before either asks for the
              // other's, so the opposite orders really cross (a replay skips this).
              if (attempts <= 2) {
                if (++holdingOuter === 2) yield* bothHoldOuter.open
                yield* bothHoldOuter.await
              }
              yield* writer.write(insertMark(`${inner}-inner`), { key: inner })
            }),
            { key: outer }
          )
        yield* Effect.all([nested(h1, "a", "b"), nested(h2, "b", "a")], { concurrency: "unbounded" })
        expect((yield* retries) - before).toBe(1)
        expect(attempts).toBe(3)
        const marks = yield* Effect.provide(
          Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ who: string }>`SELECT who FROM marks ORDER BY who`),
          h1
        )
        expect(marks.map((row) => row.who)).toEqual(["a-inner", "a-outer", "b-inner", "b-outer"])
      })
    ))

  it.live("a nested keyed write whose savepoint rolls back releases its key before the outer transaction ends (check 33)", () =>
    withHosts(({ h1, h2 }) =>
      Effect.gen(function*() {
        const released = yield* Deferred.make<void>()
        const otherCommitted = yield* Deferred.make<void>()
        const outer = yield* write(
          h1,
          Effect.gen(function*() {
            const writer = yield* DurableWriter.DurableWriter
            yield* writer.write(Effect.zipRight(insertMark("nested"), Effect.fail("nested failed" as const)), { key: "b" })
              .pipe(Effect.catchAll(() => Effect.void))
            yield* Deferred.succeed(released, undefined)
            yield* awaitOrFail(otherCommitted, "the other host's write on b committed")
            return yield* countMarks("other-host-on-b")
          }),
          { key: "a" }
        ).pipe(Effect.fork)
        yield* Deferred.await(released)
        yield* write(h2, insertMark("other-host-on-b"), { key: "b" })
        yield* Deferred.succeed(otherCommitted, undefined)
        expect(yield* Fiber.join(outer)).toBe(1)
        expect(yield* Effect.provide(countMarks("nested"), h1)).toBe(0)
      })
    ))
})
