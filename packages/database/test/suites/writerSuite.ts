/**
 * DurableWriter behaviour that must hold on every dialect (spec 6.1, 6.3, 6.6; checks
 * 5, 6, 7, 12, 14, 34), written once and run against SQLite and PostgreSQL layers.
 */
import { expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Deferred, Effect, Exit, Fiber, Layer, Logger, Ref } from "effect"
import * as DurableWriter from "@baton/database/DurableWriter"

type DatabaseLayer = Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, unknown>

class AppError {
  readonly _tag = "AppError"
}

const setup = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const writer = yield* DurableWriter.DurableWriter
  yield* writer.write(sql`CREATE TABLE items (name TEXT NOT NULL)`)
  yield* writer.write(sql`CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)`)
  yield* writer.write(sql`INSERT INTO counter (id, value) VALUES (1, 0)`)
  const names = Effect.map(sql<{ readonly name: string }>`SELECT name FROM items ORDER BY name`, (rows) =>
    rows.map((row) => row.name))
  const counter = Effect.map(sql<{ readonly value: number }>`SELECT value FROM counter WHERE id = 1`, (rows) =>
    Number(rows[0]!.value))
  const increment = Effect.gen(function*() {
    const value = yield* counter
    yield* Effect.yieldNow()
    yield* sql`UPDATE counter SET value = ${value + 1} WHERE id = 1`
  })
  return { sql, writer, names, counter, increment }
})

export const writerSuite = (layer: () => DatabaseLayer, options: { readonly keysAreIgnored: boolean }) => {
  const test = (name: string, body: Effect.Effect<void, unknown, SqlClient.SqlClient | DurableWriter.DurableWriter>) =>
    it.effect(name, () => Effect.provide(body, layer()))

  test("a body failing with an app error after its first statement returns that error and leaves no row", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    const error = new AppError()
    const result = yield* writer.write(Effect.zipRight(sql`INSERT INTO items (name) VALUES ('a')`, Effect.fail(error))).pipe(
      Effect.flip
    )
    // Effect may wrap a failure in a span-capturing proxy; it is the same error.
    expect(result).toBeInstanceOf(AppError)
    expect(result).toEqual(error)
    expect(yield* names).toEqual([])
  }))

  test("a body failing with an SqlError leaves as DatabaseError and rolls back", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    const result = yield* writer.write(
      Effect.zipRight(sql`INSERT INTO items (name) VALUES ('a')`, sql`INSERT INTO missing_table VALUES (1)`)
    ).pipe(Effect.flip)
    expect(result).toBeInstanceOf(DurableWriter.DatabaseError)
    expect((result as DurableWriter.DatabaseError).code).toBe("schema")
    expect(yield* names).toEqual([])
  }))

  test("committed rows are visible to a later bare read", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    const value = yield* writer.write(Effect.as(sql`INSERT INTO items (name) VALUES ('a')`, 42))
    expect(value).toBe(42)
    expect(yield* names).toEqual(["a"])
  }))

  test("20 concurrent schema-wide read-then-increment writes end at 20", Effect.gen(function*() {
    const { counter, increment, writer } = yield* setup
    yield* Effect.forEach(Array.from({ length: 20 }), () => writer.write(increment), { concurrency: "unbounded" })
    expect(yield* counter).toBe(20)
  }))

  if (options.keysAreIgnored) {
    test("20 concurrent keyed read-then-increment writes end at 20 (keys are ignored)", Effect.gen(function*() {
      const { counter, increment, writer } = yield* setup
      yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) => writer.write(increment, { key: `k${i}` }),
        { concurrency: "unbounded" }
      )
      expect(yield* counter).toBe(20)
    }))
  }

  test("20 concurrent writes on one key serialize", Effect.gen(function*() {
    const { counter, increment, writer } = yield* setup
    yield* Effect.forEach(Array.from({ length: 20 }), () => writer.write(increment, { key: "same" }), {
      concurrency: "unbounded"
    })
    expect(yield* counter).toBe(20)
  }))

  test("an invalid key dies before any SQL", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    for (const key of ["", "x".repeat(1025), "a\u0000b", "lone\ud800", "\udc00x"]) {
      const exit = yield* Effect.exit(writer.write(sql`INSERT INTO items (name) VALUES ('bad')`, { key }))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      if (Exit.isFailure(exit)) expect(String(Cause.squash(exit.cause))).toContain("DurableWriter: invalid lock key")
    }
    yield* writer.write(sql`INSERT INTO items (name) VALUES ('ok')`, { key: "x".repeat(1024) })
    yield* writer.write(sql`INSERT INTO items (name) VALUES ('pair')`, { key: "pair\ud83d\ude00" })
    expect(yield* names).toEqual(["ok", "pair"])
  }))

  test("a failed nested write rolls back to its savepoint and the outer write commits", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    yield* writer.write(Effect.gen(function*() {
      yield* sql`INSERT INTO items (name) VALUES ('A')`
      const nested = yield* writer.write(Effect.zipRight(sql`INSERT INTO items (name) VALUES ('B')`, Effect.fail(new AppError())))
        .pipe(Effect.flip)
      expect(nested).toBeInstanceOf(AppError)
      yield* sql`INSERT INTO items (name) VALUES ('C')`
    }))
    expect(yield* names).toEqual(["A", "C"])
  }))

  test("savepoint: false joins the enclosing write: its work commits and rolls back with it", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    yield* writer.write(Effect.gen(function*() {
      yield* writer.write(sql`INSERT INTO items (name) VALUES ('joined')`, { key: "k1", savepoint: false })
      // A joined write opens no savepoint: a nested savepointed write still works inside it.
      yield* writer.write(writer.write(sql`INSERT INTO items (name) VALUES ('deeper')`, { savepoint: false }))
    }))
    expect(yield* names).toEqual(["deeper", "joined"])
    const failed = yield* writer.write(Effect.gen(function*() {
      yield* writer.write(sql`INSERT INTO items (name) VALUES ('gone')`, { key: "k1", savepoint: false })
      return yield* Effect.fail(new AppError())
    })).pipe(Effect.flip)
    expect(failed).toBeInstanceOf(AppError)
    expect(yield* names).toEqual(["deeper", "joined"])
  }))

  test("savepoint: false: a joined failure that the enclosing write catches rolls it back and dies", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    const exit = yield* writer.write(Effect.gen(function*() {
      yield* sql`INSERT INTO items (name) VALUES ('outer')`
      const inner = yield* writer.write(
        Effect.zipRight(sql`INSERT INTO items (name) VALUES ('partial')`, Effect.fail(new AppError())),
        { savepoint: false }
      ).pipe(Effect.flip)
      expect(inner).toBeInstanceOf(AppError)
    })).pipe(Effect.exit)
    expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
    expect(String(Exit.isFailure(exit) ? Cause.squash(exit.cause) : "")).toContain("joined without a savepoint failed")
    expect(yield* names).toEqual([])
    // A savepointed write around the joined one absorbs the poison: only it rolls back.
    yield* writer.write(Effect.gen(function*() {
      yield* sql`INSERT INTO items (name) VALUES ('kept')`
      const died = yield* writer.write(Effect.gen(function*() {
        yield* writer.write(Effect.zipRight(sql`INSERT INTO items (name) VALUES ('partial')`, Effect.fail(new AppError())), {
          savepoint: false
        }).pipe(Effect.ignore)
      })).pipe(Effect.exit)
      expect(Exit.isFailure(died) && Cause.isDie(died.cause)).toBe(true)
    }))
    expect(yield* names).toEqual(["kept"])
  }))

  test("joinWithoutSavepoints: nested writes join as savepoint: false; without it a caught nested failure is a savepoint's", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    const body = Effect.gen(function*() {
      yield* sql`INSERT INTO items (name) VALUES ('outer')`
      yield* writer.write(Effect.zipRight(sql`INSERT INTO items (name) VALUES ('partial')`, Effect.fail(new AppError())), {
        key: "k1"
      }).pipe(Effect.ignore)
    })
    // Savepointed (the default): the caught failure rolls back its own savepoint only.
    yield* writer.write(body)
    expect(yield* names).toEqual(["outer"])
    // Joined: the caught failure poisons the enclosing write, which dies and writes nothing.
    const exit = yield* DurableWriter.joinWithoutSavepoints(writer.write(body)).pipe(Effect.exit)
    expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
    expect(yield* names).toEqual(["outer"])
    // Joined writes that succeed commit with the enclosing one, and an outermost write is unchanged.
    yield* DurableWriter.joinWithoutSavepoints(writer.write(Effect.gen(function*() {
      yield* writer.write(sql`INSERT INTO items (name) VALUES ('joined')`, { key: "k1" })
      yield* writer.write(writer.write(sql`INSERT INTO items (name) VALUES ('deeper')`))
    })))
    expect(yield* names).toEqual(["deeper", "joined", "outer"])
  }))

  test("a nested write reports isInTransaction and joins the outer transaction", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    expect(yield* DurableWriter.isInTransaction).toBe(false)
    const failed = yield* writer.write(Effect.gen(function*() {
      expect(yield* DurableWriter.isInTransaction).toBe(true)
      yield* writer.write(sql`INSERT INTO items (name) VALUES ('inner')`, { key: "k1" })
      return yield* Effect.fail(new AppError())
    })).pipe(Effect.flip)
    expect(failed).toBeInstanceOf(AppError)
    // The nested write's work belonged to the outer transaction, so it rolled back too.
    expect(yield* names).toEqual([])
  }))

  test("afterCommit runs a hook once, after commit, and never after a rollback", Effect.gen(function*() {
    const { sql, writer } = yield* setup
    const runs = yield* Ref.make<Array<string>>([])
    const hook = (name: string) => Ref.update(runs, (all) => [...all, name])
    expect(yield* DurableWriter.afterCommit(hook("outside"))).toBe(false)
    yield* writer.write(Effect.gen(function*() {
      expect(yield* DurableWriter.afterCommit(hook("committed"))).toBe(true)
      yield* sql`INSERT INTO items (name) VALUES ('a')`
      expect(yield* Ref.get(runs)).toEqual([])
    }))
    expect(yield* Ref.get(runs)).toEqual(["committed"])
    yield* writer.write(Effect.zipRight(DurableWriter.afterCommit(hook("rolled-back")), Effect.fail(new AppError())))
      .pipe(Effect.flip)
    expect(yield* Ref.get(runs)).toEqual(["committed"])
  }))

  test("afterCommit of a nested write runs after the outer commit, not for a failed savepoint", Effect.gen(function*() {
    const { writer } = yield* setup
    const runs = yield* Ref.make<Array<string>>([])
    const hook = (name: string) => Ref.update(runs, (all) => [...all, name])
    yield* writer.write(Effect.gen(function*() {
      yield* writer.write(DurableWriter.afterCommit(hook("kept")))
      yield* writer.write(Effect.zipRight(DurableWriter.afterCommit(hook("discarded")), Effect.fail(new AppError())))
        .pipe(Effect.ignore)
      expect(yield* Ref.get(runs)).toEqual([])
    }))
    expect(yield* Ref.get(runs)).toEqual(["kept"])
  }))

  test("afterCommit answers false inside raw transactions and for another client", Effect.gen(function*() {
    const { sql, writer } = yield* setup
    const runs = yield* Ref.make(0)
    const hook = Ref.update(runs, (n) => n + 1)
    expect(yield* sql.withTransaction(DurableWriter.afterCommit(hook))).toBe(false)
    // A write joined to a raw transaction is not managed: its hooks could never run.
    expect(yield* sql.withTransaction(writer.write(DurableWriter.afterCommit(hook)))).toBe(false)
    const other = yield* Layer.build(layer())
    const otherSql = (yield* Effect.provide(SqlClient.SqlClient, other))
    yield* writer.write(Effect.gen(function*() {
      expect(yield* sql.withTransaction(DurableWriter.afterCommit(hook))).toBe(false)
      expect(yield* sql.withTransaction(writer.write(DurableWriter.afterCommit(hook)))).toBe(false)
      expect(yield* DurableWriter.afterCommit(hook, otherSql)).toBe(false)
      expect(yield* DurableWriter.afterCommit(hook, sql)).toBe(true)
    }))
    expect(yield* Ref.get(runs)).toBe(1)
  }).pipe(Effect.scoped))

  test("a hook that starts a write completes; a defecting hook is logged and later hooks still run", Effect.gen(function*() {
    const { names, sql, writer } = yield* setup
    const runs = yield* Ref.make<Array<string>>([])
    const logged: Array<string> = []
    const capture = Logger.make(({ cause, logLevel, message }) => {
      logged.push(`${logLevel.label} ${String(message)} ${Cause.pretty(cause)}`)
    })
    const value = yield* writer.write(Effect.gen(function*() {
      yield* DurableWriter.afterCommit(Effect.orDie(writer.write(sql`INSERT INTO items (name) VALUES ('from-hook')`)))
      yield* DurableWriter.afterCommit(Effect.dieMessage("hook defect"))
      yield* DurableWriter.afterCommit(Ref.update(runs, (all) => [...all, "later"]))
      return "done"
    })).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
    expect(value).toBe("done")
    expect(logged.length).toBe(1)
    expect(logged[0]).toContain("ERROR")
    expect(logged[0]).toContain("hook defect")
    expect(yield* names).toEqual(["from-hook"])
    expect(yield* Ref.get(runs)).toEqual(["later"])
  }))

  test("a write from a fiber that outlived its transaction dies", Effect.gen(function*() {
    const { sql, writer } = yield* setup
    const release = yield* Deferred.make<void>()
    const escaped = yield* writer.write(
      Effect.forkDaemon(Effect.zipRight(Deferred.await(release), writer.write(sql`INSERT INTO items (name) VALUES ('late')`)))
    )
    yield* Deferred.succeed(release, undefined)
    const exit = yield* Fiber.await(escaped)
    expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
    if (Exit.isFailure(exit)) {
      expect(String(Cause.squash(exit.cause))).toContain("write called from a fiber that outlived its transaction")
    }
  }))

  test("a write on another database nested inside a managed write dies", Effect.gen(function*() {
    const { sql, writer } = yield* setup
    const other = yield* Layer.build(layer())
    const otherWriter = yield* Effect.provide(DurableWriter.DurableWriter, other)
    const exit = yield* Effect.exit(writer.write(otherWriter.write(sql`SELECT 1`)))
    expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
    if (Exit.isFailure(exit)) {
      expect(String(Cause.squash(exit.cause))).toContain(
        "DurableWriter: a write on one database was nested inside a write on another database"
      )
    }
  }).pipe(Effect.scoped))

  test("affectedRows reads the driver's raw result of a write statement", Effect.gen(function*() {
    const { sql, writer } = yield* setup
    yield* writer.write(Effect.all([sql`INSERT INTO items (name) VALUES ('a')`, sql`INSERT INTO items (name) VALUES ('b')`]))
    const changed = yield* writer.write(
      Effect.flatMap(sql`UPDATE items SET name = name || '!'`.raw, DurableWriter.affectedRows)
    )
    expect(changed).toBe(2)
    const none = yield* writer.write(Effect.flatMap(sql`DELETE FROM items WHERE name = 'zzz'`.raw, DurableWriter.affectedRows))
    expect(none).toBe(0)
  }))
}
