import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { journalFenceSuite, journalHost } from "./suites/journalFences.js"

/** Two stacks, each with its own connection, over one SQLite file. */
const twoHosts = Effect.gen(function*() {
  const filename = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "run-store-fences-")), "runs.db")
  const one = yield* Layer.build(journalHost(SqliteDatabase.layer({ filename })))
  const two = yield* Layer.build(journalHost(SqliteDatabase.layer({ filename })))
  return [one, two] as const
})

describe("the journal fenced through the run row (SQLite)", () =>
  journalFenceSuite("SQLite (in-memory)", () => TestDatabase.layer, twoHosts, 60_000))
