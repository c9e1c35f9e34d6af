/**
 * PostgreSQL intention locks (spec section 7; checks 27, 28, 31, 32, 33): two
 * `PgDatabase` layers (two pools, as two hosts) on one schema.
 */
import { describe, expect, it } from "@effect/vitest"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Deferred, Duration, Effect, Fiber, Layer, Metric, Redacted, Ref, Scope } from "effect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"

const url = TestDatabase.postgresTestUrl("database: PostgreSQL intention locks")

interface Host {
  readonly sql: SqlClient.SqlClient
  readonly writer: DurableWriter.Service
}

const hostOf = (context: Context.Context<SqlClient.SqlClient | DurableWriter.DurableWriter>): Host => ({
  sql: Context.get(context, SqlClient.SqlClient),
  writer: Context.get(context, DurableWriter.DurableWriter)
})

/** Host 1 owns a fresh schema; host 2 is a second pool on the same schema. */
const twoHosts = (options: PgDatabase.PgDatabaseOptions = {}) =>
  Effect.gen(function*() {
    const scope = yield* Scope.Scope
    const host1 = hostOf(yield* Layer.buildWithScope(TestDatabase.layerPostgres(url!), scope))
    const [row] = yield* host1.sql<{ readonly schema: string }>`SELECT current_schema() AS schema`
    const schema = row!.schema
    const host2 = hostOf(yield* Layer.buildWithScope(PgDatabase.layer({ url: url!, schema, ...options }), scope))
    yield* host1.writer.write(Effect.all([
      host1.sql`CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)`,
      host1.sql`INSERT INTO counter (id, value) VALUES (1, 0)`,
      host1.sql`CREATE TABLE events (name TEXT NOT NULL)`
    ]))
    return { host1, host2, schema }
  })

const readCounter = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ readonly value: number }>`SELECT value FROM counter WHERE id = 1`, (rows) => Number(rows[0]!.value))

/** Read the counter, wait, write read + 1; returns the value read. */
const slowIncrement = (sql: SqlClient.SqlClient, wait: Duration.DurationInput) =>
  Effect.gen(function*() {
    const value = yield* readCounter(sql)
    yield* Effect.sleep(wait)
    yield* sql`UPDATE counter SET value = ${value + 1} WHERE id = 1`
    return value
  })

const events = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ readonly name: string }>`SELECT name FROM events ORDER BY name`, (rows) => rows.map((r) => r.name))

const retries = Effect.map(Metric.value(DurableWriter.writeRetries), (state) => state.count)

/** Wait for a signal another host gives only after its own commit; a serialized pair never gives it. */
const awaitOther = (signal: Deferred.Deferred<void>) =>
  Deferred.await(signal).pipe(
    Effect.timeoutFail({ duration: "15 seconds", onTimeout: () => new Error("the other write never committed") })
  )

describe.skipIf(url === undefined)("PostgreSQL intention locks", () => {
  it.live("two schema-wide writes on two pools serialize: the counter ends at 2 (check 27)", () =>
    Effect.gen(function*() {
      const { host1, host2 } = yield* twoHosts()
      const reads = yield* Effect.all([
        host1.writer.write(slowIncrement(host1.sql, "200 millis")),
        host2.writer.write(slowIncrement(host2.sql, "200 millis"))
      ], { concurrency: "unbounded" })
      expect(reads.sort()).toEqual([0, 1])
      expect(yield* readCounter(host1.sql)).toBe(2)
    }).pipe(Effect.scoped))

  it.live("control: the same pair through bare @effect/sql-pg clients loses an update (check 27)", () =>
    Effect.gen(function*() {
      const { host1, schema } = yield* twoHosts()
      const bare = () =>
        Effect.gen(function*() {
          const sql = yield* PgClient.PgClient
          yield* sql.withTransaction(Effect.gen(function*() {
            const [row] = yield* sql.unsafe<{ readonly value: number }>(`SELECT value FROM "${schema}".counter WHERE id = 1`)
            yield* Effect.sleep("200 millis")
            yield* sql.unsafe(`UPDATE "${schema}".counter SET value = $1 WHERE id = 1`, [Number(row!.value) + 1])
          }))
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url!) })))
      yield* Effect.all([bare(), bare()], { concurrency: "unbounded" })
      expect(yield* readCounter(host1.sql)).toBe(1)
    }).pipe(Effect.scoped))

  it.live("a write waiting past lock_timeout fails 55P03 as busy, is replayed and commits after the holder (check 28)", () =>
    Effect.gen(function*() {
      const { host1, host2 } = yield* twoHosts({ lockTimeout: "100 millis" })
      const holding = yield* Deferred.make<void>()
      const before = yield* retries
      const holder = yield* Effect.fork(host1.writer.write(Effect.gen(function*() {
        yield* host1.sql`INSERT INTO events (name) VALUES ('holder')`
        yield* Deferred.succeed(holding, undefined)
        yield* Effect.sleep("500 millis")
      })))
      yield* Deferred.await(holding)
      const seen = yield* host2.writer.write(Effect.zipLeft(events(host2.sql), host2.sql`INSERT INTO events (name) VALUES ('waiter')`))
      yield* Fiber.join(holder)
      // The waiter's committed attempt started after the holder committed.
      expect(seen).toEqual(["holder"])
      expect((yield* retries) - before).toBeGreaterThan(0)
      expect(yield* events(host1.sql)).toEqual(["holder", "waiter"])
    }).pipe(Effect.scoped))

  it.live("writes on different keys overlap across hosts (check 31)", () =>
    Effect.gen(function*() {
      const { host1, host2 } = yield* twoHosts()
      const holding = yield* Deferred.make<void>()
      const committed = yield* Deferred.make<void>()
      const first = yield* Effect.fork(host1.writer.write(Effect.gen(function*() {
        yield* host1.sql`INSERT INTO events (name) VALUES ('r1')`
        yield* Deferred.succeed(holding, undefined)
        yield* awaitOther(committed)
        // READ COMMITTED: host 2's row committed while this transaction is open.
        return yield* events(host1.sql)
      }), { key: "r1" }))
      yield* Deferred.await(holding)
      yield* host2.writer.write(host2.sql`INSERT INTO events (name) VALUES ('r2')`, { key: "r2" })
      yield* Deferred.succeed(committed, undefined)
      expect(yield* Fiber.join(first)).toEqual(["r1", "r2"])
    }).pipe(Effect.scoped))

  it.live("writes on different keys overlap through one layer, two fibers (check 31)", () =>
    Effect.gen(function*() {
      const { host1 } = yield* twoHosts()
      const holding = yield* Deferred.make<void>()
      const committed = yield* Deferred.make<void>()
      const first = yield* Effect.fork(host1.writer.write(Effect.gen(function*() {
        yield* Deferred.succeed(holding, undefined)
        yield* awaitOther(committed)
      }), { key: "r1" }))
      yield* Deferred.await(holding)
      yield* host1.writer.write(host1.sql`INSERT INTO events (name) VALUES ('r2')`, { key: "r2" })
      yield* Deferred.succeed(committed, undefined)
      yield* Fiber.join(first)
      expect(yield* events(host1.sql)).toEqual(["r2"])
    }).pipe(Effect.scoped))

  it.live("writes on one key serialize across hosts: the counter ends at 2 (check 32)", () =>
    Effect.gen(function*() {
      const { host1, host2 } = yield* twoHosts()
      const reads = yield* Effect.all([
        host1.writer.write(slowIncrement(host1.sql, "200 millis"), { key: "r1" }),
        host2.writer.write(slowIncrement(host2.sql, "200 millis"), { key: "r1" })
      ], { concurrency: "unbounded" })
      expect(reads.sort()).toEqual([0, 1])
      expect(yield* readCounter(host1.sql)).toBe(2)
    }).pipe(Effect.scoped))

  it.live("a schema-wide write waits for an open keyed write, and a keyed write for an open schema-wide one (check 32)", () =>
    Effect.gen(function*() {
      const { host1, host2 } = yield* twoHosts()
      const pairs: ReadonlyArray<readonly [string | undefined, string | undefined]> = [["r1", undefined], [undefined, "r1"]]
      for (const [firstKey, secondKey] of pairs) {
        yield* host1.writer.write(host1.sql`DELETE FROM events`)
        const holding = yield* Deferred.make<void>()
        const first = yield* Effect.fork(host1.writer.write(Effect.gen(function*() {
          yield* Deferred.succeed(holding, undefined)
          yield* Effect.sleep("300 millis")
          yield* host1.sql`INSERT INTO events (name) VALUES ('first')`
        }), firstKey === undefined ? {} : { key: firstKey }))
        yield* Deferred.await(holding)
        const seen = yield* host2.writer.write(
          Effect.zipLeft(events(host2.sql), host2.sql`INSERT INTO events (name) VALUES ('second')`),
          secondKey === undefined ? {} : { key: secondKey }
        )
        yield* Fiber.join(first)
        // The second write's body ran only after the first committed.
        expect(seen).toEqual(["first"])
      }
    }).pipe(Effect.scoped))

  it.live("nested keys taken in opposite orders deadlock once, classified busy and replayed (check 33)", () =>
    Effect.gen(function*() {
      const { host1, host2 } = yield* twoHosts()
      const attempts = yield* Ref.make(0)
      const holdsA = yield* Deferred.make<void>()
      const holdsB = yield* Deferred.make<void>()
      const before = yield* retries
      const crossed = (host: Host, outer: string, inner: string, mine: Deferred.Deferred<void>, theirs: Deferred.Deferred<void>) =>
        host.writer.write(Effect.gen(function*() {
          yield* Ref.update(attempts, (n) => n + 1)
          yield* host.sql`INSERT INTO events (name) VALUES (${outer})`
          yield* Deferred.succeed(mine, undefined)
          yield* Deferred.await(theirs)
          yield* host.writer.write(host.sql`INSERT INTO events (name) VALUES (${`${outer}>${inner}`})`, { key: inner })
        }), { key: outer })
      yield* Effect.all([crossed(host1, "a", "b", holdsA, holdsB), crossed(host2, "b", "a", holdsB, holdsA)], {
        concurrency: "unbounded"
      })
      expect(yield* Ref.get(attempts)).toBe(3)
      expect((yield* retries) - before).toBe(1)
      expect(yield* events(host1.sql)).toEqual(["a", "a>b", "b", "b>a"])
    }).pipe(Effect.scoped))

  it.live("a nested keyed write whose savepoint rolls back releases its key (check 33)", () =>
    Effect.gen(function*() {
      const { host1, host2 } = yield* twoHosts()
      const released = yield* Deferred.make<void>()
      const committed = yield* Deferred.make<void>()
      const outer = yield* Effect.fork(host1.writer.write(Effect.gen(function*() {
        yield* host1.writer.write(Effect.zipRight(host1.sql`SELECT 1`, Effect.fail("rolled back" as const)), { key: "b" })
          .pipe(Effect.ignore)
        yield* Deferred.succeed(released, undefined)
        yield* awaitOther(committed)
      }), { key: "a" }))
      yield* Deferred.await(released)
      yield* host2.writer.write(host2.sql`INSERT INTO events (name) VALUES ('b')`, { key: "b" })
      yield* Deferred.succeed(committed, undefined)
      yield* Fiber.join(outer)
      expect(yield* events(host1.sql)).toEqual(["b"])
    }).pipe(Effect.scoped))

  it.live("a nested keyed write that succeeds holds its key to the outermost commit", () =>
    Effect.gen(function*() {
      const { host1, host2 } = yield* twoHosts()
      const holding = yield* Deferred.make<void>()
      const outer = yield* Effect.fork(host1.writer.write(Effect.gen(function*() {
        yield* host1.writer.write(host1.sql`INSERT INTO events (name) VALUES ('nested')`, { key: "b" })
        yield* Deferred.succeed(holding, undefined)
        yield* Effect.sleep("300 millis")
        yield* host1.sql`INSERT INTO events (name) VALUES ('outer')`
      }), { key: "a" }))
      yield* Deferred.await(holding)
      const seen = yield* host2.writer.write(events(host2.sql), { key: "b" })
      yield* Fiber.join(outer)
      expect(seen).toEqual(["nested", "outer"])
    }).pipe(Effect.scoped))

  it.live("in one process a queued schema-wide write is not overtaken by a later keyed write", () =>
    Effect.gen(function*() {
      const { host1 } = yield* twoHosts()
      const log = (name: string) => host1.sql`INSERT INTO events (name) VALUES (${name})`
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      const note = (name: string) => Ref.update(order, (all) => [...all, name])
      const holding = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const keyed = yield* Effect.fork(host1.writer.write(Effect.gen(function*() {
        yield* note("r1")
        yield* Deferred.succeed(holding, undefined)
        yield* Deferred.await(release)
      }), { key: "r1" }))
      yield* Deferred.await(holding)
      const wide = yield* Effect.fork(host1.writer.write(Effect.zipRight(note("wide"), log("wide"))))
      yield* Effect.sleep("50 millis")
      const later = yield* Effect.fork(host1.writer.write(Effect.zipRight(note("r2"), log("r2")), { key: "r2" }))
      yield* Effect.sleep("100 millis")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(keyed)
      yield* Fiber.join(wide)
      yield* Fiber.join(later)
      expect(yield* Ref.get(order)).toEqual(["r1", "wide", "r2"])
    }).pipe(Effect.scoped))

  it.live("two pools migrating a fresh schema at once both succeed and each migration runs once", () =>
    Effect.gen(function*() {
      const { host1, host2 } = yield* twoHosts()
      const runs = yield* Ref.make(0)
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const set: Migrations.MigrationSet = {
        namespace: "app",
        idOffset: 10_000,
        migrations: {
          "0001_first": Effect.gen(function*() {
            yield* Ref.update(runs, (n) => n + 1)
            yield* Deferred.succeed(entered, undefined)
            yield* Deferred.await(release)
            const sql = yield* SqlClient.SqlClient
            yield* sql`CREATE TABLE t_first (id INTEGER PRIMARY KEY)`
          }),
          "0002_second": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE t_second (id INTEGER PRIMARY KEY)`)
        }
      }
      const first = yield* Effect.fork(Effect.provideService(Migrations.run([set]), SqlClient.SqlClient, host1.sql))
      yield* Deferred.await(entered)
      const second = yield* Effect.fork(Effect.provideService(Migrations.run([set]), SqlClient.SqlClient, host2.sql))
      yield* Effect.sleep("100 millis")
      yield* Deferred.succeed(release, undefined)
      const results = [yield* Fiber.join(first), yield* Fiber.join(second)]
      expect(results.map((r) => r.length).sort()).toEqual([0, 2])
      expect(yield* Ref.get(runs)).toBe(1)
      const ledger = yield* host1.sql<{ readonly id: number }>`SELECT migration_id AS id FROM flows_migrations ORDER BY migration_id`
      expect(ledger.map((row) => Number(row.id))).toEqual([10_001, 10_002])
    }).pipe(Effect.scoped))
  it.live("a keyed write holds exactly the key lock of its text, whatever characters the key has", () =>
    Effect.gen(function*() {
      const { host1, host2, schema } = yield* twoHosts()
      // The transaction opening is sent as one script with the key as a literal: quotes,
      // backslashes and replacement patterns must reach the server unchanged.
      for (const key of ["plain", "it's", "back\\slash\\'", "$&$'$`$$1", "ünï ☃ \n tab\t"]) {
        const held = yield* host1.writer.write(
          Effect.gen(function*() {
            const [self] = yield* host1.sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`
            const rows = yield* host2.sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM pg_locks
              WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock' AND objsubid = 1
              AND pid = ${self!.pid}
              AND ((classid::bigint << 32) | objid::bigint) = hashtextextended('baton:key:' || ${schema} || ':' || ${key}, 0)`
            return Number(rows[0]!.n)
          }),
          { key }
        )
        expect(held, key).toBe(1)
      }
    }).pipe(Effect.scoped))
})
