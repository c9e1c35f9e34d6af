import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Dialect from "@baton/database/Dialect"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import { dialectSuite } from "./suites/dialectSuite.js"

describe("Dialect on SQLite (TestDatabase)", () => {
  dialectSuite(() => TestDatabase.layer, { postgres: false })

  it.effect("isReadOnly is true only for clients opened read-only", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-dialect-"))
    const filename = path.join(dir, "flags.db")
    const readOnlyOf = (readOnly: boolean) =>
      Effect.provide(Effect.map(SqlClient.SqlClient, Dialect.isReadOnly), SqliteDatabase.layer({ filename, readOnly }))
    return Effect.gen(function*() {
      expect(yield* readOnlyOf(false)).toBe(false)
      expect(yield* readOnlyOf(true)).toBe(true)
    }).pipe(Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))))
  })
})
