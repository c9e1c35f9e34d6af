/**
 * Probes written as a new user from README.md, docs/database.md and the exported
 * docstrings: they try to break the write boundary, the ledger and the layers.
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Layer, Ref, Scope } from "effect"
import Sqlite from "better-sqlite3"
import * as fs from "node:fs"
import * as path from "node:path"
import { events } from "./fixtures/events.js"
import { removeTempDirs, snapshot, tempDir } from "./fixtures/files.js"
import { completion, spawnFixture } from "./support/processes.js"

afterAll(removeTempDirs)

// Every test names its timeout: a run outside the workspace config (a package's own `vitest run`)
// would otherwise get vitest's 5 s. Sized for a loaded 2-core machine: a probe is one scenario
// (well under a second idle); a test that spawns processes or races several opens waits on
// process start-up and the open ladder, seconds each under load.
const probeTimeout = 60_000
const processTimeout = 240_000

const fixture = (name: string) => new URL(`./fixtures/${name}.ts`, import.meta.url)

const pgUrl = TestDatabase.postgresTestUrl("database: BreakTest")

class Boom {
  readonly _tag = "Boom"
}

const items = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const writer = yield* DurableWriter.DurableWriter
  yield* writer.write(sql`CREATE TABLE items (name TEXT NOT NULL)`)
  const names = Effect.map(sql<{ readonly name: string }>`SELECT name FROM items ORDER BY name`, (rows) =>
    rows.map((row) => row.name))
  return { sql, writer, names }
})

describe("nested writes run concurrently inside one write", () => {
  // `Effect.forEach(..., { concurrency })` of nested writes inside one write: each
  // nested failure must roll back only its own work (docs: "Nesting joins").
  const siblings = Effect.gen(function*() {
    const { names, sql, writer } = yield* items
    const hooks = yield* Ref.make<Array<string>>([])
    const aInserted = yield* Deferred.make<void>()
    const a = writer.write(Effect.gen(function*() {
      yield* sql`INSERT INTO items (name) VALUES ('a')`
      yield* Deferred.succeed(aInserted, undefined)
      yield* Effect.sleep("50 millis")
      yield* DurableWriter.afterCommit(Ref.update(hooks, (h) => [...h, "a"]))
      return yield* Effect.fail(new Boom())
    }))
    const b = Effect.zipRight(
      Deferred.await(aInserted),
      writer.write(Effect.gen(function*() {
        yield* sql`INSERT INTO items (name) VALUES ('b')`
        yield* DurableWriter.afterCommit(Ref.update(hooks, (h) => [...h, "b"]))
      }))
    )
    const [aExit, bExit] = yield* writer.write(Effect.all([Effect.exit(a), Effect.exit(b)], { concurrency: 2 }))
    expect(Exit.isFailure(aExit)).toBe(true)
    expect(Exit.isSuccess(bExit)).toBe(true)
    expect(yield* names).toEqual(["b"])
    expect(yield* Ref.get(hooks)).toEqual(["b"])
  })

  it.live("SQLite: a failing sibling savepoint neither keeps its row nor discards a sibling that succeeded", () =>
    siblings.pipe(Effect.provide(TestDatabase.layer)), probeTimeout)

  it.live.skipIf(pgUrl === undefined)(
    "PostgreSQL: a failing sibling savepoint neither keeps its row nor discards a sibling that succeeded",
    () => siblings.pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl!))),
    probeTimeout
  )
})

describe("real driver failures are classified once, with their stable code, and never replayed", () => {
  const classified = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter
    yield* writer.write(Effect.all([
      sql`CREATE TABLE p (id INTEGER PRIMARY KEY)`,
      sql`CREATE TABLE c (id INTEGER PRIMARY KEY, pid INTEGER REFERENCES p (id), n INTEGER NOT NULL CHECK (n > 0))`,
      sql`INSERT INTO p (id) VALUES (1)`,
      sql`INSERT INTO c (id, pid, n) VALUES (1, 1, 1)`
    ]))
    const cases: ReadonlyArray<readonly [string, Effect.Effect<unknown, SqlError>, DurableWriter.DatabaseErrorCode]> = [
      ["missing table", sql`INSERT INTO nowhere (x) VALUES (1)`, "schema"],
      ["missing column", sql`UPDATE c SET nothere = 1`, "schema"],
      ["duplicate key", sql`INSERT INTO c (id, pid, n) VALUES (1, 1, 1)`, "constraint"],
      ["NOT NULL", sql`INSERT INTO c (id, pid, n) VALUES (2, 1, NULL)`, "constraint"],
      ["CHECK", sql`INSERT INTO c (id, pid, n) VALUES (2, 1, -1)`, "constraint"],
      ["foreign key", sql`INSERT INTO c (id, pid, n) VALUES (2, 99, 1)`, "constraint"],
      ["syntax", sql.unsafe("INSERT INTO c VALUES (("), "unknown"]
    ]
    for (const [name, statement, code] of cases) {
      const attempts = yield* Ref.make(0)
      const error = yield* Effect.flip(writer.write(Effect.zipRight(Ref.update(attempts, (n) => n + 1), statement)))
      expect([name, error]).toMatchObject([name, { _tag: "@baton/database/DatabaseError", code }])
      expect(error.message).not.toContain("nowhere")
      expect([name, yield* Ref.get(attempts)]).toEqual([name, 1])
    }
  })
  it.effect("SQLite", () => classified.pipe(Effect.provide(TestDatabase.layer)), probeTimeout)
  it.live.skipIf(pgUrl === undefined)("PostgreSQL", () => classified.pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl!))), probeTimeout)
})

describe("interruption mid-write", () => {
  it.live("interrupting a write after its first statement leaves nothing and the file takes the next write", () =>
    Effect.gen(function*() {
      const filename = path.join(tempDir(), "baton.db")
      const layer = SqliteDatabase.layer({ filename })
      yield* Effect.gen(function*() {
        const { names, sql, writer } = yield* items
        const inside = yield* Deferred.make<void>()
        const fiber = yield* Effect.fork(writer.write(Effect.gen(function*() {
          yield* sql`INSERT INTO items (name) VALUES ('half')`
          yield* Deferred.succeed(inside, undefined)
          yield* Effect.never
        })))
        yield* Deferred.await(inside)
        const exit = yield* Fiber.interrupt(fiber)
        expect(Exit.isInterrupted(exit)).toBe(true)
        expect(yield* names).toEqual([])
        yield* writer.write(sql`INSERT INTO items (name) VALUES ('next')`).pipe(Effect.timeout("5 seconds"))
        expect(yield* names).toEqual(["next"])
      }).pipe(Effect.provide(layer))
      // Another connection sees the same.
      const db = new Sqlite(filename, { readonly: true })
      try {
        expect(db.prepare("SELECT name FROM items").all()).toEqual([{ name: "next" }])
      } finally {
        db.close()
      }
    }), probeTimeout)

  it.live("interrupting a write inside a nested savepoint rolls back the whole transaction", () =>
    Effect.gen(function*() {
      const { names, sql, writer } = yield* items
      const inside = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(writer.write(Effect.gen(function*() {
        yield* sql`INSERT INTO items (name) VALUES ('outer')`
        yield* writer.write(Effect.gen(function*() {
          yield* sql`INSERT INTO items (name) VALUES ('inner')`
          yield* Deferred.succeed(inside, undefined)
          yield* Effect.never
        }))
      })))
      yield* Deferred.await(inside)
      expect(Exit.isInterrupted(yield* Fiber.interrupt(fiber))).toBe(true)
      expect(yield* names).toEqual([])
      yield* writer.write(sql`INSERT INTO items (name) VALUES ('next')`).pipe(Effect.timeout("5 seconds"))
      expect(yield* names).toEqual(["next"])
    }).pipe(Effect.provide(TestDatabase.layer)), probeTimeout)

  const timedOutNested = Effect.gen(function*() {
    const { names, sql, writer } = yield* items
    const hooks = yield* Ref.make<Array<string>>([])
    const slow = Dialect.isPostgres(sql) ? sql`SELECT pg_sleep(5)` : Effect.never
    yield* writer.write(Effect.gen(function*() {
      yield* sql`INSERT INTO items (name) VALUES ('outer')`
      const timedOut = yield* writer.write(Effect.gen(function*() {
        yield* sql`INSERT INTO items (name) VALUES ('inner')`
        yield* DurableWriter.afterCommit(Ref.update(hooks, (h) => [...h, "inner"]))
        yield* slow
      })).pipe(Effect.timeout("200 millis"), Effect.flip)
      expect(timedOut._tag).toBe("TimeoutException")
      yield* sql`INSERT INTO items (name) VALUES ('after')`
      yield* DurableWriter.afterCommit(Ref.update(hooks, (h) => [...h, "outer"]))
    }))
    expect(yield* names).toEqual(["after", "outer"])
    expect(yield* Ref.get(hooks)).toEqual(["outer"])
  })

  it.live("SQLite: a nested write interrupted by a timeout rolls back its savepoint; the enclosing write goes on and commits", () =>
    timedOutNested.pipe(Effect.provide(TestDatabase.layer)), probeTimeout)

  it.live.skipIf(pgUrl === undefined)(
    "PostgreSQL: a nested write interrupted mid-statement by a timeout rolls back its savepoint; the enclosing write goes on and commits",
    () => timedOutNested.pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl!))),
    probeTimeout
  )

  it.live("interrupting a write during its retry backoff stops the replays", () =>
    Effect.gen(function*() {
      const { writer } = yield* items
      const attempts = yield* Ref.make(0)
      const fiber = yield* Effect.fork(writer.write(
        Effect.zipRight(Ref.update(attempts, (n) => n + 1), Effect.fail(new DurableWriter.DatabaseError({ code: "busy" })))
      ))
      yield* Effect.sleep("30 millis")
      const before = yield* Ref.get(attempts)
      expect(before).toBeGreaterThanOrEqual(1)
      expect(Exit.isInterrupted(yield* Fiber.interrupt(fiber))).toBe(true)
      yield* Effect.sleep("300 millis")
      expect(yield* Ref.get(attempts)).toBe(before)
    }).pipe(Effect.provide(TestDatabase.layerWith({ writer: { baseDelayMs: 50, maxDelayMs: 50, maxAttempts: 100 } }))), probeTimeout)
})

describe("a process killed mid-write (SIGKILL)", () => {
  /** The set of fixtures/break-killed-writer.ts, with this process's `0002_fill`. */
  const hangingSet = (fill: Effect.Effect<void, unknown, SqlClient.SqlClient>): Migrations.MigrationSet => ({
    namespace: "break",
    idOffset: 20_000,
    migrations: {
      "0001_items": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE items (n INTEGER NOT NULL)`),
      "0002_fill": fill
    }
  })

  const killedInside = async (filename: string, mode: "write" | "migrate") => {
    const child = spawnFixture(fixture("break-killed-writer"), [JSON.stringify({ filename, mode })])
    const done = completion(child)
    await events(child).next("inside")
    child.kill("SIGKILL")
    const result = await done
    expect(result.signal).toBe("SIGKILL")
  }

  it("a killed write leaves no row, and the next process's write takes the lock at once", async () => {
    const filename = path.join(tempDir(), "baton.db")
    await Effect.runPromise(Effect.provide(
      Migrations.run([hangingSet(Effect.void)]),
      SqliteDatabase.layer({ filename })
    ))
    await killedInside(filename, "write")
    const count = await Effect.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      yield* writer.write(sql`INSERT INTO items (n) VALUES (-1)`).pipe(Effect.timeout("5 seconds"))
      return (yield* sql<{ n: number }>`SELECT count(*) AS n FROM items`)[0]!.n
    }).pipe(Effect.provide(SqliteDatabase.layer({ filename, writer: { maxAttempts: 1 } }))))
    expect(count).toBe(1)
  }, processTimeout)

  it("a pass killed inside a migration leaves nothing applied, and the next pass applies every migration", async () => {
    const filename = path.join(tempDir(), "baton.db")
    await killedInside(filename, "migrate")
    const fill = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO items (n) VALUES (7)`)
    const { applied, rows } = await Effect.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const applied = yield* Migrations.run([hangingSet(fill)])
      const rows = yield* sql<{ n: number }>`SELECT n FROM items`
      return { applied, rows }
    }).pipe(Effect.provide(SqliteDatabase.layer({ filename }))))
    expect(applied.map((m) => m.id)).toEqual([20_001, 20_002])
    expect(rows).toEqual([{ n: 7 }])
  }, processTimeout)
})

describe("SQLite read-only client while another process holds the write lock", () => {
  it("reads in a write without waiting, and an INSERT fails read_only once (not busy)", async () => {
    const filename = path.join(tempDir(), "baton.db")
    const set: Migrations.MigrationSet = {
      namespace: "fixture",
      idOffset: 10_000,
      migrations: {
        "0001_counter": Effect.flatMap(SqlClient.SqlClient, (sql) =>
          Effect.zipRight(
            sql`CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)`,
            sql`INSERT INTO counter (id, value) VALUES (1, 0)`
          ))
      }
    }
    await Effect.runPromise(Effect.provide(Migrations.run([set]), SqliteDatabase.layer({ filename })))
    const releaseFile = path.join(path.dirname(filename), "release")
    const holder = spawnFixture(fixture("sqlite-lock-holder"), [
      JSON.stringify({ filename, mode: "immediate", holdMs: -1, bumpCounter: true, releaseFile })
    ])
    const done = completion(holder)
    try {
      await events(holder).next("locked")
      const result = await Effect.runPromise(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const writer = yield* DurableWriter.DurableWriter
        const attempts = yield* Ref.make(0)
        const read = yield* writer.write(sql<{ value: number }>`SELECT value FROM counter WHERE id = 1`).pipe(
          Effect.timeout("2 seconds")
        )
        const insert = yield* Effect.flip(writer.write(
          Effect.zipRight(Ref.update(attempts, (n) => n + 1), sql`UPDATE counter SET value = 5 WHERE id = 1`)
        ))
        return { read: read[0]!.value, code: insert.code, attempts: yield* Ref.get(attempts) }
      }).pipe(Effect.provide(SqliteDatabase.layer({ filename, readOnly: true }))))
      // The holder's uncommitted +1000 is invisible; the write fails without retrying.
      expect(result).toEqual({ read: 0, code: "read_only", attempts: 1 })
    } finally {
      fs.writeFileSync(releaseFile, "")
      await done
    }
  }, processTimeout)
})

describe("SQLite sidecars", () => {
  it.live("the -wal and -shm files of a new database get the database's mode 0600 (they hold the same data)", () =>
    Effect.gen(function*() {
      const filename = path.join(tempDir(), "baton.db")
      const previous = process.umask(0)
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const writer = yield* DurableWriter.DurableWriter
        yield* writer.write(sql`CREATE TABLE secrets (v TEXT)`)
        yield* writer.write(sql`INSERT INTO secrets (v) VALUES ('input')`)
        for (const suffix of ["", "-wal", "-shm"]) {
          expect([suffix, fs.statSync(`${filename}${suffix}`).mode & 0o777]).toEqual([suffix, 0o600])
        }
      }).pipe(
        Effect.provide(SqliteDatabase.layer({ filename })),
        Effect.ensuring(Effect.sync(() => process.umask(previous)))
      )
    }), probeTimeout)
})

describe("SQLite read-only open of a WAL database", () => {
  // SQLite itself creates `-wal`/`-shm` for a WAL reader when they are missing (and a
  // reader cannot remove them): only the database file is compared (reported to the lead).
  it.live("with no other connection open it reads the data and leaves the database file byte-identical", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "baton.db")
      const set: Migrations.MigrationSet = {
        namespace: "app",
        idOffset: 0,
        migrations: {
          "0001_t": Effect.flatMap(SqlClient.SqlClient, (sql) =>
            Effect.zipRight(sql`CREATE TABLE t (x INTEGER)`, sql`INSERT INTO t (x) VALUES (42)`))
        }
      }
      yield* Migrations.run([set]).pipe(Effect.provide(SqliteDatabase.layer({ filename })))
      const before = snapshot(dir)
      expect(Object.keys(before)).toEqual(["baton.db"])
      const rows = yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ x: number }>`SELECT x FROM t`).pipe(
        Effect.provide(SqliteDatabase.layer({ filename, readOnly: true }))
      )
      expect(rows).toEqual([{ x: 42 }])
      expect(snapshot(dir)["baton.db"]).toBe(before["baton.db"])
    }), probeTimeout)
})

describe("several openers of one SQLite file in one process", () => {
  it.live("8 layers opening one missing file at once all open it, and their concurrent writes serialize", () =>
    Effect.gen(function*() {
      const filename = path.join(tempDir(), "fresh", "baton.db")
      const scope = yield* Scope.Scope
      const hosts = yield* Effect.all(
        Array.from({ length: 8 }, () =>
          Effect.map(Layer.buildWithScope(SqliteDatabase.layer({ filename, writer: { baseDelayMs: 1, maxDelayMs: 5, maxAttempts: 1000 } }), scope), (context) => ({
            sql: Context.get(context, SqlClient.SqlClient),
            writer: Context.get(context, DurableWriter.DurableWriter)
          }))),
        { concurrency: "unbounded" }
      )
      const set: Migrations.MigrationSet = {
        namespace: "app",
        idOffset: 0,
        migrations: {
          "0001_counter": Effect.flatMap(SqlClient.SqlClient, (sql) =>
            Effect.zipRight(
              sql`CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)`,
              sql`INSERT INTO counter (id, value) VALUES (1, 0)`
            ))
        }
      }
      const applied = yield* Effect.all(
        hosts.map((host) => Migrations.run([set]).pipe(Effect.provideService(SqlClient.SqlClient, host.sql))),
        { concurrency: "unbounded" }
      )
      expect(applied.flat().length).toBe(1)
      yield* Effect.all(
        hosts.flatMap((host) =>
          Array.from({ length: 10 }, () =>
            host.writer.write(Effect.gen(function*() {
              const [row] = yield* host.sql<{ value: number }>`SELECT value FROM counter WHERE id = 1`
              yield* Effect.yieldNow()
              yield* host.sql`UPDATE counter SET value = ${row!.value + 1} WHERE id = 1`
            })))
        ),
        { concurrency: "unbounded" }
      )
      const [row] = yield* hosts[0]!.sql<{ value: number }>`SELECT value FROM counter WHERE id = 1`
      expect(row!.value).toBe(80)
    }).pipe(Effect.scoped), processTimeout)
})

describe("afterCommit order and savepoint: false under a raw savepoint", () => {
  it.effect("hooks run in registration order across nested, joined and failed nested writes", () =>
    Effect.gen(function*() {
      const { writer } = yield* items
      const runs = yield* Ref.make<Array<string>>([])
      const hook = (name: string) => DurableWriter.afterCommit(Ref.update(runs, (all) => [...all, name]))
      yield* writer.write(Effect.gen(function*() {
        yield* hook("1")
        yield* writer.write(Effect.gen(function*() {
          yield* hook("2")
          yield* writer.write(hook("3"))
          yield* writer.write(hook("4"), { savepoint: false })
        }))
        yield* writer.write(Effect.zipRight(hook("dropped"), Effect.fail(new Boom()))).pipe(Effect.ignore)
        yield* hook("5")
      }))
      expect(yield* Ref.get(runs)).toEqual(["1", "2", "3", "4", "5"])
    }).pipe(Effect.provide(TestDatabase.layer)), probeTimeout)

  it.effect("a savepoint: false write failing under a raw savepoint uses a savepoint: caught, it rolls back alone", () =>
    Effect.gen(function*() {
      const { names, sql, writer } = yield* items
      yield* writer.write(Effect.gen(function*() {
        yield* sql`INSERT INTO items (name) VALUES ('outer')`
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* writer.write(Effect.zipRight(sql`INSERT INTO items (name) VALUES ('joined')`, Effect.fail(new Boom())), {
            savepoint: false
          }).pipe(Effect.ignore)
          yield* sql`INSERT INTO items (name) VALUES ('raw')`
        }))
      }))
      expect(yield* names).toEqual(["outer", "raw"])
    }).pipe(Effect.provide(TestDatabase.layer)), probeTimeout)
})

describe("afterCommit and a failing COMMIT", () => {
  it.live("a hook registered in a write whose COMMIT fails on a deferred foreign key never runs", () =>
    Effect.gen(function*() {
      const filename = path.join(tempDir(), "baton.db")
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const writer = yield* DurableWriter.DurableWriter
        yield* writer.write(Effect.all([
          sql`CREATE TABLE parent (id INTEGER PRIMARY KEY)`,
          sql`CREATE TABLE child (pid INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`
        ]))
        const hooks = yield* Ref.make(0)
        const attempts = yield* Ref.make(0)
        const exit = yield* Effect.exit(writer.write(Effect.gen(function*() {
          yield* Ref.update(attempts, (n) => n + 1)
          yield* sql`INSERT INTO child (pid) VALUES (42)`
          expect(yield* DurableWriter.afterCommit(Ref.update(hooks, (n) => n + 1))).toBe(true)
        })))
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) {
          expect(Cause.squash(exit.cause)).toMatchObject({ _tag: "@baton/database/DatabaseError", code: "constraint" })
        }
        expect(yield* Ref.get(hooks)).toBe(0)
        expect(yield* Ref.get(attempts)).toBe(1)
        const [row] = yield* sql<{ n: number }>`SELECT count(*) AS n FROM child`
        expect(row!.n).toBe(0)
      }).pipe(Effect.provide(SqliteDatabase.layer({ filename })))
    }), probeTimeout)
})

describe("Migrations", () => {
  const set = (migrations: Migrations.MigrationSet["migrations"]): Migrations.MigrationSet => ({
    namespace: "app",
    idOffset: 0,
    migrations
  })
  const ddl = (text: string) => Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text))

  it.effect("swapping the names of two applied migrations is a history mismatch naming the first", () =>
    Effect.gen(function*() {
      yield* Migrations.run([set({ "0001_a": ddl("CREATE TABLE a (x INTEGER)"), "0002_b": ddl("CREATE TABLE b (x INTEGER)") })])
      const error = yield* Effect.flip(
        Migrations.run([set({ "0001_b": ddl("CREATE TABLE b2 (x INTEGER)"), "0002_a": ddl("CREATE TABLE a2 (x INTEGER)") })])
      )
      expect(error).toMatchObject({ _tag: "@baton/database/MigrationError", reason: "history_mismatch", migrationId: 1 })
      expect(error.message).toBe("migration 1 of app is recorded under another name than this build declares (app_b)")
      const sql = yield* SqlClient.SqlClient
      expect((yield* sql<{ n: number }>`SELECT count(*) AS n FROM sqlite_master WHERE name IN ('a2', 'b2')`)[0]!.n).toBe(0)
    }).pipe(Effect.provide(TestDatabase.layer)), probeTimeout)

  it.live("a migration failing busy once replays the whole pass: every migration applied once, earlier effects re-run", () =>
    Effect.gen(function*() {
      const runs = yield* Ref.make<Array<string>>([])
      const track = (name: string, effect: Effect.Effect<unknown, unknown, SqlClient.SqlClient>) =>
        Effect.zipRight(Ref.update(runs, (all) => [...all, name]), effect)
      let busyOnce = true
      const busy = Effect.suspend(() => {
        if (!busyOnce) return Effect.void
        busyOnce = false
        return Effect.fail(new DurableWriter.DatabaseError({ code: "busy" }))
      })
      const applied = yield* Migrations.run([set({
        "0001_a": track("a", ddl("CREATE TABLE a (x INTEGER)")),
        "0002_b": track("b", Effect.zipRight(ddl("CREATE TABLE b (x INTEGER)"), busy))
      })])
      expect(applied.map((m) => m.id)).toEqual([1, 2])
      expect(yield* Ref.get(runs)).toEqual(["a", "b", "a", "b"])
      expect((yield* Migrations.status([set({ "0001_a": Effect.void, "0002_b": Effect.void })])).applied.length).toBe(2)
    }).pipe(Effect.provide(TestDatabase.layer)), probeTimeout)

  it.live("a migration always failing busy stops after options.retry.maxAttempts with a busy DatabaseError, nothing applied", () =>
    Effect.gen(function*() {
      const attempts = yield* Ref.make(0)
      const always = set({
        "0001_a": ddl("CREATE TABLE a (x INTEGER)"),
        "0002_b": Effect.zipRight(Ref.update(attempts, (n) => n + 1), Effect.fail(new DurableWriter.DatabaseError({ code: "busy" })))
      })
      const error = yield* Effect.flip(Migrations.run([always], { retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 } }))
      expect(error).toMatchObject({ _tag: "@baton/database/DatabaseError", code: "busy" })
      expect(yield* Ref.get(attempts)).toBe(3)
      const status = yield* Migrations.status([always])
      expect(status.applied).toEqual([])
      const sql = yield* SqlClient.SqlClient
      expect((yield* sql<{ n: number }>`SELECT count(*) AS n FROM sqlite_master WHERE name = 'a'`)[0]!.n).toBe(0)
    }).pipe(Effect.provide(TestDatabase.layer)), probeTimeout)

  it.effect("a package composed later in a lower block is applied, not a hole (holes are per block)", () =>
    Effect.gen(function*() {
      const later: Migrations.MigrationSet = { namespace: "later", idOffset: 1000, migrations: { "0001_l": ddl("CREATE TABLE l (x INTEGER)") } }
      const lower: Migrations.MigrationSet = { namespace: "lower", idOffset: 0, migrations: { "0001_w": ddl("CREATE TABLE w (x INTEGER)") } }
      expect((yield* Migrations.run([later])).map((m) => m.id)).toEqual([1001])
      expect((yield* Migrations.run([lower, later])).map((m) => m.id)).toEqual([1])
      expect((yield* Migrations.status([lower, later])).pending).toEqual([])
    }).pipe(Effect.provide(TestDatabase.layer)), probeTimeout)

  it.effect("a failing migration in a later set leaves the earlier sets' migrations of the pass unapplied", () =>
    Effect.gen(function*() {
      const first: Migrations.MigrationSet = { namespace: "first", idOffset: 0, migrations: { "0001_t": ddl("CREATE TABLE t1 (x INTEGER)") } }
      const second: Migrations.MigrationSet = {
        namespace: "second",
        idOffset: 1000,
        migrations: { "0001_t": ddl("CREATE TABLE t2 (x INTEGER)"), "0002_bad": ddl("CREATE TABLE t1 (x INTEGER)") }
      }
      const error = yield* Effect.flip(Migrations.run([second, first]))
      expect(error).toMatchObject({ reason: "failed", migrationId: 1002 })
      expect(error.message).toContain("1002 (second_bad)")
      const status = yield* Migrations.status([first, second])
      expect(status.applied).toEqual([])
      expect(status.pending.map((m) => m.id)).toEqual([1, 1001, 1002])
      const sql = yield* SqlClient.SqlClient
      expect((yield* sql<{ n: number }>`SELECT count(*) AS n FROM sqlite_master WHERE name IN ('t1', 't2')`)[0]!.n).toBe(0)
    }).pipe(Effect.provide(TestDatabase.layer)), probeTimeout)
})

describe.skipIf(pgUrl === undefined)("PostgreSQL", () => {
  const hostOf = (context: Context.Context<SqlClient.SqlClient | DurableWriter.DurableWriter>) => ({
    sql: Context.get(context, SqlClient.SqlClient),
    writer: Context.get(context, DurableWriter.DurableWriter)
  })

  it.live("a COMMIT failing with a serialization failure is replayed and its hook runs exactly once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      yield* writer.write(Effect.all([
        sql`CREATE SEQUENCE commit_failures`,
        sql`CREATE TABLE t (x INTEGER NOT NULL)`,
        sql.unsafe(`CREATE FUNCTION fail_first_commit() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            IF nextval('commit_failures') = 1 THEN
              RAISE EXCEPTION 'conflict at commit' USING ERRCODE = '40001';
            END IF;
            RETURN NULL;
          END $$`),
        sql.unsafe(`CREATE CONSTRAINT TRIGGER t_commit AFTER INSERT ON t
          DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_first_commit()`)
      ]))
      const attempts = yield* Ref.make(0)
      const hooks = yield* Ref.make(0)
      yield* writer.write(Effect.gen(function*() {
        yield* Ref.update(attempts, (n) => n + 1)
        yield* sql`INSERT INTO t (x) VALUES (1)`
        expect(yield* DurableWriter.afterCommit(Ref.update(hooks, (n) => n + 1))).toBe(true)
      }))
      expect(yield* Ref.get(attempts)).toBe(2)
      expect(yield* Ref.get(hooks)).toBe(1)
      const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM t`
      expect(row!.n).toBe(1)
    }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl!))), probeTimeout)

  it.live("a COMMIT failing on a deferred unique constraint is a typed constraint failure, run once, hook never run", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      yield* writer.write(sql`CREATE TABLE u (x INTEGER UNIQUE DEFERRABLE INITIALLY DEFERRED)`)
      yield* writer.write(sql`INSERT INTO u (x) VALUES (1)`)
      const attempts = yield* Ref.make(0)
      const hooks = yield* Ref.make(0)
      const exit = yield* Effect.exit(writer.write(Effect.gen(function*() {
        yield* Ref.update(attempts, (n) => n + 1)
        yield* sql`INSERT INTO u (x) VALUES (1)`
        expect(yield* DurableWriter.afterCommit(Ref.update(hooks, (n) => n + 1))).toBe(true)
      })))
      expect(Exit.isFailure(exit) && Cause.isFailType(exit.cause)).toBe(true)
      if (Exit.isFailure(exit)) {
        expect(Cause.squash(exit.cause)).toMatchObject({ _tag: "@baton/database/DatabaseError", code: "constraint" })
      }
      expect(yield* Ref.get(attempts)).toBe(1)
      expect(yield* Ref.get(hooks)).toBe(0)
      yield* writer.write(sql`INSERT INTO u (x) VALUES (2)`)
      const rows = yield* sql<{ x: number }>`SELECT x FROM u ORDER BY x`
      expect(rows.map((r) => r.x)).toEqual([1, 2])
    }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl!))), probeTimeout)

  it.live("interrupting a write mid-statement cancels it: nothing commits and another pool writes at once", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.Scope
      const a = hostOf(yield* Layer.buildWithScope(TestDatabase.layerPostgres(pgUrl!), scope))
      const [row] = yield* a.sql<{ s: string }>`SELECT current_schema() AS s`
      const b = hostOf(yield* Layer.buildWithScope(PgDatabase.layer({ url: pgUrl!, schema: row!.s }), scope))
      yield* a.writer.write(a.sql`CREATE TABLE t (x INTEGER NOT NULL)`)
      const inside = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(a.writer.write(Effect.gen(function*() {
        yield* a.sql`INSERT INTO t (x) VALUES (1)`
        yield* Deferred.succeed(inside, undefined)
        yield* a.sql`SELECT pg_sleep(30)`
      })))
      yield* Deferred.await(inside)
      yield* Effect.sleep("200 millis")
      expect(Exit.isInterrupted(yield* Fiber.interrupt(fiber).pipe(Effect.timeout("5 seconds")))).toBe(true)
      yield* b.writer.write(b.sql`INSERT INTO t (x) VALUES (2)`).pipe(
        Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error("the interrupted write still holds the lock") })
      )
      const rows = yield* b.sql<{ x: number }>`SELECT x FROM t ORDER BY x`
      expect(rows.map((r) => r.x)).toEqual([2])
    }).pipe(Effect.scoped), probeTimeout)

  it.live("a write whose connection is killed mid-body fails io once, commits nothing, and the next write succeeds", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      yield* writer.write(sql`CREATE TABLE t (x INTEGER NOT NULL)`)
      const attempts = yield* Ref.make(0)
      const hooks = yield* Ref.make(0)
      const exit = yield* Effect.exit(writer.write(Effect.gen(function*() {
        yield* Ref.update(attempts, (n) => n + 1)
        yield* sql`INSERT INTO t (x) VALUES (1)`
        yield* DurableWriter.afterCommit(Ref.update(hooks, (n) => n + 1))
        yield* sql`SELECT pg_terminate_backend(pg_backend_pid())`
      })))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) {
        expect(Cause.isFailType(exit.cause)).toBe(true)
        expect(Cause.squash(exit.cause)).toMatchObject({ _tag: "@baton/database/DatabaseError", code: "io" })
      }
      expect(yield* Ref.get(attempts)).toBe(1)
      expect(yield* Ref.get(hooks)).toBe(0)
      for (let i = 0; i < 3; i++) {
        yield* writer.write(sql`INSERT INTO t (x) VALUES (2)`).pipe(Effect.timeout("5 seconds"))
      }
      const rows = yield* sql<{ x: number }>`SELECT x FROM t`
      expect(rows.map((r) => r.x)).toEqual([2, 2, 2])
    }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl!))), probeTimeout)

  it.live("schemas are isolated: locks, keys and the ledger of one schema do not reach another", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.Scope
      const a = hostOf(yield* Layer.buildWithScope(TestDatabase.layerPostgres(pgUrl!), scope))
      const b = hostOf(yield* Layer.buildWithScope(TestDatabase.layerPostgres(pgUrl!), scope))
      const set: Migrations.MigrationSet = {
        namespace: "app",
        idOffset: 0,
        migrations: { "0001_t": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE t (x INTEGER)`) }
      }
      const applied = yield* Migrations.run([set]).pipe(Effect.provideService(SqlClient.SqlClient, a.sql))
      expect(applied.map((m) => m.id)).toEqual([1])
      const statusB = yield* Migrations.status([set]).pipe(Effect.provideService(SqlClient.SqlClient, b.sql))
      expect(statusB.applied).toEqual([])
      expect(statusB.pending.map((m) => m.id)).toEqual([1])
      const [schemaA] = yield* a.sql<{ s: string }>`SELECT current_schema() AS s`
      const where = yield* a.sql<{ s: string }>`SELECT table_schema AS s FROM information_schema.tables WHERE table_name = 't'`
      expect(where.map((r) => r.s)).toEqual([schemaA!.s])
      // While A holds its schema lock exclusively, and then key "k", B's writes proceed.
      for (const key of [undefined, "k"]) {
        const holding = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(a.writer.write(
          Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(release)),
          key === undefined ? undefined : { key }
        ))
        yield* Deferred.await(holding)
        const exit = yield* Effect.exit(b.writer.write(b.sql`SELECT 1`, key === undefined ? undefined : { key }).pipe(
          Effect.timeoutFail({ duration: "3 seconds", onTimeout: () => new Error(`blocked by another schema (${key})`) })
        ))
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        expect(Exit.isSuccess(exit)).toBe(true)
      }
    }).pipe(Effect.scoped), probeTimeout)
})

describe("layer options are refused before anything is opened or created", () => {
  const sqliteCases: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
    ["mode 0o10000", { mode: 0o10000 }, "mode:"],
    ["mode 1.5", { mode: 1.5 }, "mode:"],
    ["mode string", { mode: "600" }, "mode:"],
    ["busyTimeout Infinity", { busyTimeout: Number.POSITIVE_INFINITY }, "busyTimeout:"],
    ["busyTimeout infinite duration", { busyTimeout: "Infinity" }, "busyTimeout:"],
    ["busyTimeout NaN", { busyTimeout: Number.NaN }, "busyTimeout:"],
    ["writer null", { writer: null }, "writer:"],
    ["writer.maxAttempts string", { writer: { maxAttempts: "3" } }, "writer.maxAttempts:"],
    ["writer.baseDelayMs negative", { writer: { baseDelayMs: -1 } }, "writer.baseDelayMs:"]
  ]
  for (const [name, extra, rule] of sqliteCases) {
    it.effect(`SqliteDatabase ${name}: invalid_path naming the option, nothing created`, () =>
      Effect.gen(function*() {
        const dir = path.join(tempDir(), "sub")
        const exit = yield* Layer.build(SqliteDatabase.layer({ filename: path.join(dir, "baton.db"), ...extra } as never)).pipe(
          Effect.scoped,
          Effect.exit
        )
        expect(Exit.isFailure(exit) && Cause.isFailType(exit.cause)).toBe(true)
        if (Exit.isFailure(exit)) {
          expect(Cause.squash(exit.cause)).toMatchObject({ reason: "invalid_path" })
          expect((Cause.squash(exit.cause) as Error).message).toContain(`SqliteDatabase option ${rule}`)
        }
        expect(fs.existsSync(dir)).toBe(false)
      }), probeTimeout)
  }

  const pgCases: ReadonlyArray<readonly [string, Record<string, unknown>, string, string]> = [
    ["maxConnections 1.5", { maxConnections: 1.5 }, "invalid_url", "maxConnections:"],
    ["maxConnections string", { maxConnections: "4" }, "invalid_url", "maxConnections:"],
    ["connectTimeout garbage", { connectTimeout: "soon" }, "invalid_url", "connectTimeout:"],
    ["lockTimeout NaN", { lockTimeout: Number.NaN }, "invalid_url", "lockTimeout:"],
    ["writer null", { writer: null }, "invalid_url", "writer:"],
    ["writer.maxDelayMs string", { writer: { maxDelayMs: "5" } }, "invalid_url", "writer.maxDelayMs:"],
    ["readOnly string", { readOnly: "yes" }, "invalid_url", "readOnly:"],
    ["schema uppercase", { schema: "Baton" }, "invalid_schema", ""],
    ["schema 64 characters", { schema: "a".repeat(64) }, "invalid_schema", ""]
  ]
  for (const [name, extra, reason, rule] of pgCases) {
    it.live.skipIf(pgUrl === undefined)(`PgDatabase ${name}: ${reason}, no connection opened`, () =>
      Effect.gen(function*() {
        // An unreachable port: any connection attempt would be connect_failed, not this.
        const exit = yield* Layer.build(
          PgDatabase.layer({ url: "postgres://u:secret@127.0.0.1:1/db", ...extra } as never)
        ).pipe(Effect.scoped, Effect.exit)
        expect(Exit.isFailure(exit) && Cause.isFailType(exit.cause)).toBe(true)
        if (Exit.isFailure(exit)) {
          const error = Cause.squash(exit.cause) as Error
          expect(error).toMatchObject({ _tag: "@baton/database/DatabaseOpenError", reason })
          if (rule !== "") expect(error.message).toContain(`PgDatabase option ${rule}`)
          expect(error.message).not.toContain("secret")
        }
      }), probeTimeout)
  }
})
