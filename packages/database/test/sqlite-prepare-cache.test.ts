/**
 * A statement that failed to prepare (its table did not exist yet) works once another
 * connection has created the table: the driver's cache must not keep the failure.
 */
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Effect, Exit } from "effect"
import * as path from "node:path"
import { removeTempDirs, tempDir } from "./fixtures/files.js"

afterAll(removeTempDirs)

it.live("a table another connection creates is visible to a statement that failed before", () => {
  const filename = path.join(tempDir(), "late.db")
  return Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const before = yield* Effect.exit(sql`SELECT count(*) AS n FROM later_table`)
    expect(Exit.isFailure(before)).toBe(true)

    // Another connection (as another process would) creates the table.
    const other = new Sqlite(filename)
    other.exec("CREATE TABLE later_table (id INTEGER PRIMARY KEY); INSERT INTO later_table VALUES (1)")
    other.close()

    yield* Effect.sleep("1100 millis")
    const after = yield* sql<{ n: number }>`SELECT count(*) AS n FROM later_table`
    expect(after[0]?.n).toBe(1)
  }).pipe(Effect.provide(SqliteDatabase.layer({ filename })))
})
