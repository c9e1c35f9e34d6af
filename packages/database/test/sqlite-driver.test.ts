import { afterAll, describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import Database from "better-sqlite3"
import { Cause, Deferred, Effect, Exit, Fiber, Metric, Ref } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import { createTable, failureOf, sets, snapshot } from "./suites/migrationSuite.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "baton-db-driver-"))
let counter = 0
const freshFile = () => path.join(root, `db-${++counter}.db`)
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

const services = Effect.all({ sql: SqlClient.SqlClient, writer: DurableWriter.DurableWriter })

describe("SQLite transaction driver recovery", () => {
  it.effect("a write against a peer holding the write lock fails typed busy, then succeeds after release", () => {
    const filename = freshFile()
    return Effect.gen(function*() {
      const { sql, writer } = yield* services
      yield* writer.write(sql`CREATE TABLE items (name TEXT)`)
      const peer = new Database(filename)
      try {
        peer.exec("BEGIN IMMEDIATE")
        const exit = yield* Effect.exit(writer.write(sql`INSERT INTO items (name) VALUES ('blocked')`))
        expect(Exit.isFailure(exit) && exit.cause._tag === "Fail").toBe(true)
        const error = failureOf(exit)
        expect(error).toBeInstanceOf(DurableWriter.DatabaseError)
        expect(error.code).toBe("busy")
        if (Exit.isFailure(exit)) expect(Cause.pretty(exit.cause)).not.toContain("cannot rollback")
        peer.exec("ROLLBACK")
      } finally {
        peer.close()
      }
      yield* writer.write(sql`INSERT INTO items (name) VALUES ('after')`)
      expect(yield* sql`SELECT name FROM items`).toEqual([{ name: "after" }])
    }).pipe(Effect.provide(SqliteDatabase.layer({ filename, writer: { maxAttempts: 1 } })))
  })

  it.effect("a COMMIT failing on a deferred foreign key fails constraint and the next write succeeds", () => {
    const filename = freshFile()
    return Effect.gen(function*() {
      const { sql, writer } = yield* services
      yield* writer.write(Effect.all([
        sql`CREATE TABLE parent (id INTEGER PRIMARY KEY)`,
        sql`CREATE TABLE child (pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)`
      ]))
      const error = failureOf(yield* Effect.exit(writer.write(sql`INSERT INTO child (pid) VALUES (99)`)))
      expect(error).toBeInstanceOf(DurableWriter.DatabaseError)
      expect(error.code).toBe("constraint")
      expect(yield* DurableWriter.isInTransaction).toBe(false)
      yield* writer.write(Effect.all([sql`INSERT INTO parent (id) VALUES (1)`, sql`INSERT INTO child (pid) VALUES (1)`]))
      expect(yield* sql`SELECT pid FROM child`).toEqual([{ pid: 1 }])
    }).pipe(Effect.provide(SqliteDatabase.layer({ filename })))
  })

  it.live("a busy peer is waited out by the default retry policy", () => {
    const filename = freshFile()
    return Effect.gen(function*() {
      const { sql, writer } = yield* services
      yield* writer.write(sql`CREATE TABLE items (name TEXT)`)
      const peer = new Database(filename)
      peer.exec("BEGIN IMMEDIATE")
      const before = (yield* Metric.value(DurableWriter.writeRetries)).count
      const write = yield* Effect.fork(writer.write(sql`INSERT INTO items (name) VALUES ('waited')`))
      yield* Effect.sleep("150 millis")
      peer.exec("ROLLBACK")
      peer.close()
      yield* Fiber.join(write)
      expect((yield* Metric.value(DurableWriter.writeRetries)).count).toBeGreaterThan(before)
      expect(yield* sql`SELECT name FROM items`).toEqual([{ name: "waited" }])
    }).pipe(Effect.provide(SqliteDatabase.layer({ filename })))
  })
})

describe("Ledger on SQLite files", () => {
  it.effect("a read-only client over an unmigrated file returns [] and creates no ledger", () => {
    const filename = freshFile()
    return Effect.gen(function*() {
      yield* Effect.provide(Effect.void, SqliteDatabase.layer({ filename }))
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { a } = sets(log)
      const result = yield* Effect.provide(
        Effect.zip(Migrations.run([a]), Effect.flatMap(SqlClient.SqlClient, Dialect.tables)),
        SqliteDatabase.layer({ filename, readOnly: true })
      )
      expect(result).toEqual([[], []])
      expect(yield* Ref.get(log)).toEqual([])
    })
  })

  it.effect("a read-only client with a pending migration returns []; ahead is still refused", () => {
    const filename = freshFile()
    return Effect.gen(function*() {
      const log = yield* Ref.make<ReadonlyArray<string>>([])
      const { a, b } = sets(log)
      yield* Effect.provide(Migrations.run([a, b]), SqliteDatabase.layer({ filename }))
      const newer: Migrations.MigrationSet = { ...a, migrations: { ...a.migrations, "0002_more": createTable("t_more") } }
      const readOnly = SqliteDatabase.layer({ filename, readOnly: true })
      yield* Ref.set(log, [])
      expect(yield* Effect.provide(Migrations.run([newer, b]), readOnly)).toEqual([])
      expect(yield* Ref.get(log)).toEqual([])
      const status = yield* Effect.provide(Migrations.status([newer, b]), readOnly)
      expect(status.pending.map((m) => m.id)).toEqual([2])
      // Now the file is ahead of an older build of b.
      yield* Effect.provide(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql`INSERT INTO flows_migrations (migration_id, namespace, name, applied_at_ms) VALUES (1003, 'b', 'z', 0)`),
        SqliteDatabase.layer({ filename })
      )
      const before = yield* Effect.provide(snapshot, readOnly)
      const error = failureOf(yield* Effect.exit(Effect.provide(Migrations.run([a, b]), readOnly)))
      expect(error).toMatchObject({ reason: "ahead", migrationId: 1003 })
      expect(yield* Effect.provide(snapshot, readOnly)).toEqual(before)
    })
  })

  it.live("two layers migrating one new file at once: both succeed and each migration runs once", () => {
    const filename = freshFile()
    return Effect.gen(function*() {
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
            yield* createTable("t_first")
          }),
          "0002_second": createTable("t_second")
        }
      }
      const pass = Effect.provide(Migrations.run([set]), SqliteDatabase.layer({ filename }))
      const first = yield* Effect.fork(pass)
      yield* Deferred.await(entered)
      const second = yield* Effect.fork(pass)
      yield* Effect.sleep("100 millis")
      yield* Deferred.succeed(release, undefined)
      const results = [yield* Fiber.join(first), yield* Fiber.join(second)]
      expect(results.map((r) => r.length).sort()).toEqual([0, 2])
      expect(yield* Ref.get(runs)).toBe(1)
      const ledger = yield* Effect.provide(snapshot, SqliteDatabase.layer({ filename }))
      expect(ledger.ledger.map((row) => row.migration_id)).toEqual([10_001, 10_002])
    })
  })
})
