import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { freshLayer } from "./fixtures/runtimeContract.js"
import { tempFile } from "./fixtures/runtimeProcesses.js"
import { sqlRuntimeChecks } from "./fixtures/sqlRuntimeChecks.js"
import { storedRows } from "./fixtures/storedRows.js"
import { sqlJournal, sqlRuntime, sqliteFile } from "./fixtures/runtimeSupport.js"

// A file per test, so a second, read-only client can open the same database.
const readOnlyFile = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [main] = yield* sql<{ file: string }>`SELECT file FROM pragma_database_list WHERE name = 'main'`
  return SqliteDatabase.layer({ filename: main!.file, readOnly: true })
})

sqlRuntimeChecks(
  "sqlite",
  freshLayer(() => Layer.provideMerge(sqlJournal(), sqlRuntime(sqliteFile(tempFile())))),
  readOnlyFile
)

storedRows("sqlite", freshLayer(() => Layer.provideMerge(sqlJournal(), sqlRuntime(sqliteFile(tempFile())))))
