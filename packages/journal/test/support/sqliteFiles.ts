/** Helpers for the multi-process SQLite checks: temp files, migration, queries, fixtures. */
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as Migrations from "@baton/journal/Migrations"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"

export const fixture = (name: string) => new URL(`../fixtures/${name}.ts`, import.meta.url)
export const tempFile = () => path.join(mkdtempSync(path.join(tmpdir(), "baton-journal-")), "journal.db")
export const withStdin = { stdio: ["pipe", "pipe", "pipe"] as ["pipe", "pipe", "pipe"] }
export const timeout = 240_000

/** Create and migrate the file once so that the children race only on the work. */
export const migrate = (filename: string) =>
  Effect.runPromise(
    Migrations.run.pipe(Effect.provide(SqliteDatabase.layer({ filename })), Effect.scoped)
  )

export const query = <A>(filename: string, body: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, body).pipe(
      Effect.provide(SqliteDatabase.layer({ filename })),
      Effect.scoped
    ) as Effect.Effect<A>
  )
