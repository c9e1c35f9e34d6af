/**
 * A PostgreSQL connection that goes silent (every packet dropped, nothing closed)
 * in the middle of a write: the server ends the session within the
 * idle-in-transaction timeout, so its row lock goes to the next host; an
 * `Effect.timeout` around the stuck write returns without waiting on the dead
 * socket; and Baton sessions carry the session timeouts by default.
 */
import { readFileSync } from "node:fs"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Scope } from "effect"
import * as BlackHoleProxy from "./support/blackHoleProxy.js"

const url = TestDatabase.postgresTestUrl("pg-silent-connection")

const currentSchema = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => Effect.map(sql<{ name: string }>`SELECT current_schema() AS name`, (rows) => rows[0]!.name)
)

const viaProxy = (pgUrl: string, port: number): string => {
  const proxied = new URL(pgUrl)
  proxied.hostname = "127.0.0.1"
  proxied.port = String(port)
  return proxied.href
}

/** `FOR UPDATE NOWAIT` on the probe row in autocommit: whether another session holds its lock. */
const rowLocked = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`SELECT id FROM silent_probe WHERE id = 1 FOR UPDATE NOWAIT`.pipe(
    Effect.as(false),
    Effect.catchTag("SqlError", (error) =>
      (error.cause as { code?: unknown } | undefined)?.code === "55P03" ? Effect.succeed(true) : Effect.fail(error))
  ))

/** Poll until no other session holds the probe row's lock; answers `true` then. */
const untilReleased: Effect.Effect<boolean, SqlError, SqlClient.SqlClient> = Effect.suspend(() =>
  Effect.flatMap(
    rowLocked,
    (held) => held ? Effect.zipRight(Effect.sleep(Duration.millis(200)), untilReleased) : Effect.succeed(true)
  )
)

/**
 * A second `PgDatabase` on the suite's schema, reached through a black-hole proxy,
 * with a write that locks the probe row; `silence` black-holes the proxy and lets
 * the write's body send its next statement, which is never answered.
 */
const stuckWrite = (pgUrl: string, options: Partial<PgDatabase.PgDatabaseOptions>) =>
  Effect.gen(function*() {
    const direct = yield* SqlClient.SqlClient
    const schema = yield* currentSchema
    // Registered first, so the layer closes after the proxy stopped and cut every socket: the
    // silent sessions then end at once and hold no lock the suite's schema drop would wait for.
    const layerScope = yield* Scope.make()
    yield* Effect.addFinalizer((exit) => Scope.close(layerScope, exit))
    const proxy = yield* BlackHoleProxy.make()
    const context = yield* Layer.buildWithScope(
      PgDatabase.layer({ url: viaProxy(pgUrl, proxy.port), schema, maxConnections: 2, ...options }),
      layerScope
    )
    // Created after the open: a schema holding tables but no ledger is refused as foreign.
    yield* direct`CREATE TABLE IF NOT EXISTS silent_probe (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)`
    yield* direct`INSERT INTO silent_probe (id, v) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`
    const writer = Context.get(context, DurableWriter.DurableWriter)
    const sql = Context.get(context, SqlClient.SqlClient)
    const locked = yield* Deferred.make<void>()
    const silenced = yield* Deferred.make<void>()
    const write = writer.write(Effect.gen(function*() {
      yield* sql`UPDATE silent_probe SET v = v + 1 WHERE id = 1`
      yield* Deferred.succeed(locked, undefined)
      yield* Deferred.await(silenced)
      yield* sql`UPDATE silent_probe SET v = v + 1 WHERE id = 1`
      return "committed" as const
    }))
    const silence = Effect.zipRight(
      Effect.sync(() => proxy.blackHole()),
      Deferred.succeed(silenced, undefined)
    )
    return { write, locked, silence, sql, writer, proxy } as const
  })

describe.skipIf(url === undefined)("PgDatabase over a connection that goes silent", () => {
  const pgUrl = url!

  it.live("a silent owner's row lock is released within the idle-in-transaction timeout", () =>
    Effect.gen(function*() {
      const { locked, silence, write } = yield* stuckWrite(pgUrl, {
        idleInTransactionTimeout: Duration.seconds(1),
        statementTimeout: Duration.seconds(2),
        lockTimeout: Duration.millis(500)
      })
      const fiber = yield* Effect.fork(write)
      yield* Deferred.await(locked)
      expect(yield* rowLocked).toBe(true)
      yield* silence
      expect(yield* Effect.timeoutOption(untilReleased, Duration.seconds(30))).toEqual(Option.some(true))
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.scoped, Effect.provide(TestDatabase.layerPostgres(pgUrl))))

  it.live("Effect.timeout around a write stuck on a silent connection returns on time", () =>
    Effect.gen(function*() {
      const { locked, silence, write } = yield* stuckWrite(pgUrl, {})
      const fiber = yield* Effect.fork(Effect.exit(Effect.timeout(write, Duration.seconds(1))))
      yield* Deferred.await(locked)
      yield* silence
      // The write itself never returns (its statement is never answered); an interruption
      // that waited on it would wait forever. 15 s is a wide margin over the 1 s timeout.
      const outcome = yield* Fiber.join(fiber).pipe(Effect.timeoutOption(Duration.seconds(15)))
      expect(Option.isSome(outcome)).toBe(true)
      const exit = Option.getOrThrow(outcome)
      expect(Exit.isFailure(exit) && Cause.isTimeoutException(Cause.squash(exit.cause))).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(TestDatabase.layerPostgres(pgUrl))))

  it.live("Effect.timeout around a write whose BEGIN goes out on a silent connection returns on time", () =>
    Effect.gen(function*() {
      const { proxy, sql, writer } = yield* stuckWrite(pgUrl, {})
      // The pool keeps this connection idle; the write's BEGIN takes it after the link went silent.
      yield* sql`SELECT 1`
      proxy.blackHole()
      const outcome = yield* writer.write(sql`UPDATE silent_probe SET v = v + 1 WHERE id = 1`).pipe(
        Effect.timeout(Duration.seconds(1)),
        Effect.exit,
        Effect.timeoutOption(Duration.seconds(15))
      )
      expect(Option.isSome(outcome)).toBe(true)
      const exit = Option.getOrThrow(outcome)
      expect(Exit.isFailure(exit) && Cause.isTimeoutException(Cause.squash(exit.cause))).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(TestDatabase.layerPostgres(pgUrl))))

  it.live("closing a PgDatabase whose connections went silent returns", () =>
    Effect.gen(function*() {
      const schema = yield* currentSchema
      const proxy = yield* BlackHoleProxy.make()
      const layerScope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        PgDatabase.layer({ url: viaProxy(pgUrl, proxy.port), schema, maxConnections: 2 }),
        layerScope
      )
      yield* Context.get(context, SqlClient.SqlClient)`SELECT 1`
      proxy.blackHole()
      const closed = yield* Scope.close(layerScope, Exit.void).pipe(Effect.timeoutOption(Duration.seconds(15)))
      expect(Option.isSome(closed)).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(TestDatabase.layerPostgres(pgUrl))))

  it.live("interrupting a write stuck on a silent connection returns and its session still ends on the server", () =>
    Effect.gen(function*() {
      const { locked, silence, write } = yield* stuckWrite(pgUrl, {
        idleInTransactionTimeout: Duration.seconds(1),
        statementTimeout: Duration.seconds(2),
        lockTimeout: Duration.millis(500)
      })
      const fiber = yield* Effect.fork(write)
      yield* Deferred.await(locked)
      yield* silence
      const interrupted = yield* Fiber.interrupt(fiber).pipe(Effect.timeoutOption(Duration.seconds(15)))
      expect(Option.map(interrupted, Exit.isInterrupted)).toEqual(Option.some(true))
      // The destroyed socket's close never crosses the silent link; the server's own timeout ends it.
      expect(yield* rowLocked).toBe(true)
      expect(yield* Effect.timeoutOption(untilReleased, Duration.seconds(30))).toEqual(Option.some(true))
    }).pipe(Effect.scoped, Effect.provide(TestDatabase.layerPostgres(pgUrl))))

  it.live("Baton sessions carry the default statement and idle-in-transaction timeouts", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const show = (setting: string) =>
        Effect.map(sql.unsafe<Record<string, string>>(`SHOW ${setting}`), (rows) => rows[0]![setting])
      // Inside a write too: the transaction's own connection is a Baton session as well.
      const [idle, statement] = yield* Effect.all([
        show("idle_in_transaction_session_timeout"),
        show("statement_timeout")
      ])
      const inWrite = yield* DurableWriter.DurableWriter.pipe(
        Effect.flatMap((writer) => writer.write(show("idle_in_transaction_session_timeout")))
      )
      expect([idle, statement, inWrite]).toEqual(["10s", "15s", "10s"])
    }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl))))

  it.live("Baton sessions run without JIT compilation, in a write too", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const jit = Effect.map(sql<{ jit: string }>`SELECT current_setting('jit') AS jit`, (rows) => rows[0]!.jit)
      const inWrite = yield* DurableWriter.DurableWriter.pipe(Effect.flatMap((writer) => writer.write(jit)))
      expect([yield* jit, inWrite]).toEqual(["off", "off"])
    }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl))))

  it.live("session timeouts given as options reach the server", () =>
    Effect.gen(function*() {
      const direct = yield* SqlClient.SqlClient
      const schema = yield* currentSchema
      const rows = yield* Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ idle: string; statement: string }>`
          SELECT current_setting('idle_in_transaction_session_timeout') AS idle,
                 current_setting('statement_timeout') AS statement`
      ).pipe(Effect.provide(PgDatabase.layerClient({
        url: pgUrl,
        schema,
        idleInTransactionTimeout: "3 seconds",
        statementTimeout: "20 seconds"
      })))
      expect(rows).toEqual([{ idle: "3s", statement: "20s" }])
      // The suite's own session kept the defaults.
      const own = yield* direct<{ statement: string }>`SELECT current_setting('statement_timeout') AS statement`
      expect(own).toEqual([{ statement: "15s" }])
    }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl))))

  it.live("Baton connections run a TCP keepalive timer while idle", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ port: number }>`
        SELECT client_port AS port FROM pg_catalog.pg_stat_activity WHERE pid = pg_backend_pid()`
      // The connection is idle in the pool now; Linux lists its armed timer in /proc/net/tcp
      // (`tr` 2 is the keepalive timer; a socket without keepalive has none while idle).
      const local = `0100007F:${rows[0]!.port.toString(16).toUpperCase().padStart(4, "0")}`
      const line = readFileSync("/proc/net/tcp", "utf8").split("\n").find((row) => row.trim().split(/\s+/)[1] === local)
      expect(line?.trim().split(/\s+/)[5]?.split(":")[0]).toBe("02")
    }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl))))
})
