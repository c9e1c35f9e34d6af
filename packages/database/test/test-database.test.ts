import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { ConfigProvider, Effect, Layer, Option, Redacted } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { vi } from "vitest"
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"

const tablesNow = Effect.flatMap(SqlClient.SqlClient, Dialect.tables)

describe("TestDatabase", () => {
  it.effect("two runs under Effect.provide(layer) see independent empty databases", () =>
    Effect.gen(function*() {
      const run = Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const writer = yield* DurableWriter.DurableWriter
        const before = yield* Dialect.tables(sql)
        yield* writer.write(sql`CREATE TABLE mine (id INTEGER PRIMARY KEY)`)
        return before
      }).pipe(Effect.provide(TestDatabase.layer))
      expect(yield* run).toEqual([])
      expect(yield* run).toEqual([])
    }))

  it.effect("fibers of one build share its database", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      yield* writer.write(sql`CREATE TABLE shared (id INTEGER PRIMARY KEY)`)
      const seen = yield* Effect.fork(tablesNow).pipe(Effect.flatMap((fiber) => fiber.await))
      expect(seen._tag === "Success" && seen.value).toEqual(["shared"])
    }).pipe(Effect.provide(TestDatabase.layer)))

  it.effect("foreign keys are enforced", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      yield* writer.write(Effect.all([
        sql`CREATE TABLE parent (id INTEGER PRIMARY KEY)`,
        sql`CREATE TABLE child (pid INTEGER NOT NULL REFERENCES parent(id))`
      ]))
      const error = yield* Effect.flip(writer.write(sql`INSERT INTO child (pid) VALUES (7)`))
      expect(error).toBeInstanceOf(DurableWriter.DatabaseError)
      expect((error as DurableWriter.DatabaseError).code).toBe("constraint")
    }).pipe(Effect.provide(TestDatabase.layer)))

  it.effect("the test layer's connection reads the file layer's pragmas (busy_timeout 0, foreign_keys on)", () =>
    Effect.gen(function*() {
      const pragmas = Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [busy] = yield* sql<{ readonly timeout: number }>`PRAGMA busy_timeout`
        const [keys] = yield* sql<{ readonly foreign_keys: number }>`PRAGMA foreign_keys`
        return { busyTimeout: busy?.timeout, foreignKeys: keys?.foreign_keys }
      })
      const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "test-database-pragmas-")), "file.db")
      const fromFile = yield* Effect.provide(pragmas, SqliteDatabase.layer({ filename: file }))
      const fromTest = yield* Effect.provide(pragmas, TestDatabase.layer)
      expect(fromFile).toEqual({ busyTimeout: 0, foreignKeys: 1 })
      expect(fromTest).toEqual(fromFile)
    }))

  it.effect("Layer.provideMerge(Migrations.layer([set]), layer) exposes SqlClient and DurableWriter over a migrated database", () =>
    Effect.gen(function*() {
      const set: Migrations.MigrationSet = {
        namespace: "app",
        idOffset: 10_000,
        migrations: {
          "0001_items": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE items (name TEXT NOT NULL)`)
        }
      }
      const names = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const writer = yield* DurableWriter.DurableWriter
        yield* writer.write(sql`INSERT INTO items (name) VALUES ('a')`)
        return yield* sql<{ readonly name: string }>`SELECT name FROM items`
      }).pipe(Effect.provide(Layer.provideMerge(Migrations.layer([set]), TestDatabase.layer)))
      expect(names).toEqual([{ name: "a" }])
    }))

  it.effect("layerWith sets the writer's retry policy", () =>
    Effect.gen(function*() {
      const writer = yield* DurableWriter.DurableWriter
      let attempts = 0
      const exit = yield* Effect.exit(writer.write(Effect.suspend(() => {
        attempts++
        return Effect.fail(new DurableWriter.DatabaseError({ code: "busy" }))
      })))
      expect(exit._tag).toBe("Failure")
      expect(attempts).toBe(1)
    }).pipe(Effect.provide(TestDatabase.layerWith({ writer: { maxAttempts: 1 } }))))

  it.effect("postgresUrl reads BATON_TEST_PG_URL through the ConfigProvider", () =>
    Effect.gen(function*() {
      const present = yield* TestDatabase.postgresUrl.pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["BATON_TEST_PG_URL", "postgres://u:secret@h/db"]])))
      )
      expect(Option.map(present, Redacted.value)).toEqual(Option.some("postgres://u:secret@h/db"))
      expect(String(Option.getOrThrow(present))).not.toContain("secret")
      const absent = yield* TestDatabase.postgresUrl.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      expect(Option.isNone(absent)).toBe(true)
    }))

  it("postgresTestUrl returns the URL, or prints the skip line and returns undefined", () => {
    const saved = process.env["BATON_TEST_PG_URL"]
    const write = vi.spyOn(process.stderr, "write").mockImplementation(() => true)
    try {
      process.env["BATON_TEST_PG_URL"] = "postgres://postgres@127.0.0.1:5432/postgres"
      expect(TestDatabase.postgresTestUrl("suite a")).toBe("postgres://postgres@127.0.0.1:5432/postgres")
      expect(write).not.toHaveBeenCalled()
      delete process.env["BATON_TEST_PG_URL"]
      expect(TestDatabase.postgresTestUrl("suite b")).toBeUndefined()
      expect(write).toHaveBeenCalledWith("PostgreSQL suite skipped: suite b (BATON_TEST_PG_URL is unset)\n")
    } finally {
      write.mockRestore()
      if (saved === undefined) delete process.env["BATON_TEST_PG_URL"]
      else process.env["BATON_TEST_PG_URL"] = saved
    }
  })
})
