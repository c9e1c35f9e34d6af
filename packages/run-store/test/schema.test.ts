import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import { describe } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { runFixture } from "../../database/test/support/processes.js"
import { schemaSuite } from "./suites/schema.js"

const fixture = new URL("./fixtures/raw-delete.ts", import.meta.url)

/** A fresh SQLite file per test; a child process deletes through its own raw connection. */
let file = ""
const database = () =>
  Layer.unwrapEffect(Effect.sync(() => {
    file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "run-store-schema-")), "runs.db")
    return SqliteDatabase.layer({ filename: file })
  }))

describe("schema and revisions (SQLite file)", () =>
  schemaSuite(database, (_sql, runId) => Effect.promise(() => runFixture(fixture, ["sqlite", file, runId]))))
