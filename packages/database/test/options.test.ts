/**
 * Option validation (spec 4.2, 4.5): bad `SqliteDatabase` options fail the open with a
 * typed `DatabaseOpenError` naming the option and the rule, before any file is made;
 * bad `DurableWriter` retry options are a defect at construction (`make` throws,
 * `layer` dies) naming the option and the rule.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { removeTempDirs, tempDir } from "./fixtures/files.js"

afterAll(removeTempDirs)

const openError = (options: SqliteDatabase.SqliteDatabaseOptions) =>
  Layer.build(SqliteDatabase.layer(options)).pipe(Effect.scoped, Effect.flip)

describe("SqliteDatabase option validation", () => {
  const cases: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
    ["writer.maxAttempts -1", { writer: { maxAttempts: -1 } }, "writer.maxAttempts: must be a positive safe integer"],
    ["writer.maxAttempts 0", { writer: { maxAttempts: 0 } }, "writer.maxAttempts: must be a positive safe integer"],
    ["writer.maxAttempts 1.5", { writer: { maxAttempts: 1.5 } }, "writer.maxAttempts: must be a positive safe integer"],
    [
      "writer.baseDelayMs NaN",
      { writer: { maxAttempts: 3, baseDelayMs: Number.NaN } },
      "writer.baseDelayMs: must be a non-negative finite number of milliseconds"
    ],
    [
      "writer.maxDelayMs Infinity",
      { writer: { maxDelayMs: Number.POSITIVE_INFINITY } },
      "writer.maxDelayMs: must be a non-negative finite number of milliseconds"
    ],
    ["writer not an object", { writer: 5 }, "writer: must be an object"],
    ["busyTimeout -5", { busyTimeout: -5 }, "busyTimeout: must be a non-negative finite duration"],
    ["busyTimeout garbage", { busyTimeout: "soon" }, "busyTimeout: must be a non-negative finite duration"],
    ["mode -1", { mode: -1 }, "mode: must be an integer permission mode"],
    ["readOnly string", { readOnly: "yes" }, "readOnly: must be a boolean"],
    ["createDirectory number", { createDirectory: 1 }, "createDirectory: must be a boolean"]
  ]
  for (const [name, extra, rule] of cases) {
    it.effect(`${name}: invalid_path naming the option, nothing created`, () =>
      Effect.gen(function*() {
        const dir = path.join(tempDir(), "sub")
        const filename = path.join(dir, "baton.db")
        const error = yield* openError({ filename, ...extra } as SqliteDatabase.SqliteDatabaseOptions)
        expect(error._tag).toBe("@baton/database/DatabaseOpenError")
        expect(error.reason).toBe("invalid_path")
        expect(error.message).toContain(`SqliteDatabase option ${rule}`)
        expect(fs.existsSync(dir)).toBe(false)
      }))
  }

  for (const filename of [42, undefined, null, { path: "x.db" }]) {
    it.effect(`filename ${JSON.stringify(filename)}: invalid_path, not a TypeError`, () =>
      Effect.gen(function*() {
        const exit = yield* Layer.build(
          SqliteDatabase.layer({ filename } as unknown as SqliteDatabase.SqliteDatabaseOptions)
        ).pipe(Effect.scoped, Effect.exit)
        expect(Exit.isFailure(exit) && Cause.isFailType(exit.cause)).toBe(true)
        const error = yield* openError({ filename } as unknown as SqliteDatabase.SqliteDatabaseOptions)
        expect(error.reason).toBe("invalid_path")
        expect(error.message).toContain("SqliteDatabase option filename: must be a string path")
      }))
  }

  it.effect("valid writer options with zero delays open and write", () =>
    Effect.gen(function*() {
      const filename = path.join(tempDir(), "ok.db")
      const count = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const writer = yield* DurableWriter.DurableWriter
        yield* writer.write(sql`CREATE TABLE t (x INTEGER)`)
        return (yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM t`)[0]!.n
      }).pipe(Effect.provide(
        SqliteDatabase.layer({ filename, busyTimeout: "2 seconds", writer: { maxAttempts: 1, baseDelayMs: 0, maxDelayMs: 0 } })
      ))
      expect(count).toBe(0)
    }))
})

describe("DurableWriter retry option validation", () => {
  const bad: ReadonlyArray<readonly [DurableWriter.WriteRetryOptions, string]> = [
    [{ maxAttempts: -1 }, "maxAttempts: must be a positive safe integer (got -1)"],
    [{ maxAttempts: Number.NaN }, "maxAttempts: must be a positive safe integer (got NaN)"],
    [{ baseDelayMs: -5 }, "baseDelayMs: must be a non-negative finite number of milliseconds (got -5)"],
    [{ maxDelayMs: Number.NaN }, "maxDelayMs: must be a non-negative finite number of milliseconds (got NaN)"]
  ]
  for (const [options, message] of bad) {
    it.effect(`make throws and layer dies: ${message}`, () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        expect(() => DurableWriter.make(sql, options)).toThrow(`DurableWriter options: ${message}`)
        const exit = yield* Layer.build(DurableWriter.layer(options)).pipe(Effect.scoped, Effect.exit)
        expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
        if (Exit.isFailure(exit)) expect(String(Cause.squash(exit.cause))).toContain(message)
      }).pipe(Effect.provide(TestDatabase.layer)))
  }

  it.effect("valid options, including zero delays, construct a writer", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      expect(typeof DurableWriter.make(sql, { maxAttempts: 1, baseDelayMs: 0, maxDelayMs: 0 }).write).toBe("function")
      expect(typeof DurableWriter.make(sql, {}).write).toBe("function")
    }).pipe(Effect.provide(TestDatabase.layer)))
})
