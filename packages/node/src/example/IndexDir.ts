/**
 * The example flow `index-dir` (docs/node.md, The example): walk a directory, hash every regular file in batches as
 * fenced steps with checkpoints, and commit each batch's rows into `index_dir_files` atomically with the
 * batch's completion, so every file is indexed exactly once per run even when the owning process dies.
 *
 * @since 0.1.0
 */
import * as Dialect from "@baton/database/Dialect"
import type * as Migrations from "@baton/database/Migrations"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as nodePath from "node:path"
import * as Flow from "../Flow.js"
import * as Run from "../Run.js"
import * as Step from "../Step.js"
import * as Batches from "./batches.js"
import * as Glob from "./glob.js"
import * as Hashing from "./hashing.js"
import * as Walk from "./walk.js"

/**
 * The flow id.
 *
 * @since 0.1.0
 * @category constants
 */
export const flowId = "index-dir"

/**
 * The table the flow writes.
 *
 * @since 0.1.0
 * @category constants
 */
export const table = "index_dir_files"

/**
 * Files between two checkpoints of a batch: at most this many are hashed again after a crash.
 *
 * @since 0.1.0
 * @category constants
 */
export const checkpointEvery = 50

const MiB = 1024 * 1024

/**
 * Files per batch when the input names none.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultBatchFiles = 200

/**
 * Bytes per batch when the input names none (64 MiB).
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultBatchBytes = 64 * MiB

/** `root`: decoding resolves it to the absolute path of an existing directory. */
const Root = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: (value, _, ast) => {
    if (value.length === 0 || value.includes("\u0000")) {
      return ParseResult.fail(new ParseResult.Type(ast, value, "must be a non-empty path without NUL"))
    }
    const absolute = nodePath.resolve(value)
    let isDirectory = false
    try {
      isDirectory = fs.statSync(absolute).isDirectory()
    } catch {
      return ParseResult.fail(new ParseResult.Type(ast, value, `${absolute} does not exist`))
    }
    if (!isDirectory) return ParseResult.fail(new ParseResult.Type(ast, value, `${absolute} is not a directory`))
    try {
      fs.accessSync(absolute, fs.constants.R_OK | fs.constants.X_OK)
    } catch {
      return ParseResult.fail(new ParseResult.Type(ast, value, `${absolute} is not readable`))
    }
    return ParseResult.succeed(absolute)
  },
  encode: ParseResult.succeed
})

/** `pattern`: must compile. */
const Pattern = Schema.String.pipe(Schema.filter((value) => {
  try {
    Glob.compile(value)
    return undefined
  } catch (error) {
    return error instanceof Error ? error.message.replace(/^pattern: /, "") : String(error)
  }
}))

/**
 * The flow's input: `root` (a directory), `pattern` (glob relative to root), `batchFiles` (1..10 000,
 * default 200), `batchBytes` (1 MiB..1 GiB, default 64 MiB), `holdAt` (crash demo only).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Input = Schema.Struct({
  root: Root,
  pattern: Schema.optional(Pattern),
  batchFiles: Schema.optional(Schema.Int.pipe(Schema.between(1, 10_000))),
  batchBytes: Schema.optional(Schema.Int.pipe(Schema.between(MiB, 1024 * MiB))),
  holdAt: Schema.optional(Schema.Struct({
    batch: Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)),
    files: Schema.Int.pipe(Schema.greaterThanOrEqualTo(0))
  }))
})

/**
 * @since 0.1.0
 * @category schemas
 */
export type Input = typeof Input.Type

/**
 * The run's result.
 *
 * @since 0.1.0
 * @category models
 */
export interface Result {
  readonly root: string
  readonly files: number
  readonly bytes: number
  readonly missing: number
  readonly unreadable: number
  readonly changed: number
  readonly skipped: number
  readonly batches: number
  readonly drives: number
  readonly takeovers: number
  readonly resumedFromCheckpoint: number
}

/** What a batch step stores: its rows and how much of it this attempt hashed itself. */
interface BatchResult {
  readonly batch: string
  readonly attempt: number
  readonly resumedAt: number
  readonly results: ReadonlyArray<Hashing.FileResult>
}

/** Optional trace for tests and the benchmark: one line `<pid> <path>` per hashed file. */
const trace = (path: string): Effect.Effect<void> => {
  const file = process.env["BATON_INDEX_TRACE"]
  if (file === undefined || file === "") return Effect.void
  return Effect.sync(() => fs.appendFileSync(file, `${process.pid} ${path}\n`))
}

const decodeCheckpoint = (value: Option.Option<unknown>): { done: number; results: Array<Hashing.FileResult> } => {
  if (Option.isNone(value)) return { done: 0, results: [] }
  const v = value.value as { done?: unknown; results?: unknown }
  if (typeof v.done !== "number" || !Array.isArray(v.results)) return { done: 0, results: [] }
  return { done: v.done, results: v.results as Array<Hashing.FileResult> }
}

const hashBatch = (
  root: string,
  batchName: string,
  batchIndex: number,
  files: ReadonlyArray<Batches.ListedFile>,
  hold: { readonly batch: number; readonly files: number } | undefined
) =>
  Effect.gen(function*() {
    const step = yield* Step.StepContext
    const resumed = decodeCheckpoint(yield* Step.resumeFrom)
    const results = resumed.results.slice(0, resumed.done)
    for (let i = resumed.done; i < files.length; i++) {
      if (hold !== undefined && hold.batch === batchIndex && i === Math.min(hold.files, files.length)) {
        yield* Step.checkpoint({ done: i, results } as unknown as Step.Json)
        yield* Run.emit("index.held", { batch: batchIndex, files: i, step: batchName })
        // Wait here (heartbeat still running) for the crash demo to kill this process.
        return yield* Effect.never
      }
      const file = files[i]!
      results.push(yield* Hashing.hashFile(root, file))
      yield* trace(file.path)
      const done = i + 1
      if (done % checkpointEvery === 0 && done < files.length) {
        yield* Step.checkpoint({ done, results } as unknown as Step.Json)
      }
    }
    const value: BatchResult = { batch: batchName, attempt: step.attempt, resumedAt: resumed.done, results }
    return value
  })

const insertRows = (runId: string, value: BatchResult) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    for (let i = 0; i < value.results.length; i += 100) {
      const rows = value.results.slice(i, i + 100).map((r) => ({
        run_id: runId,
        path: r.path,
        size: r.size,
        sha256: r.sha256,
        mtime_ms: r.mtimeMs,
        status: r.status,
        batch: value.batch,
        attempt: value.attempt,
        indexed_at_ms: now
      }))
      yield* sql`INSERT INTO index_dir_files ${sql.insert(rows)}`
    }
  })

const countRows = (runId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ status: string; files: number | string; bytes: number | string | null }>`
      SELECT status, COUNT(*) AS files, SUM(size) AS bytes FROM index_dir_files WHERE run_id = ${runId} GROUP BY status`
    const by = new Map(rows.map((r) => [r.status, { files: Number(r.files), bytes: Number(r.bytes ?? 0) }]))
    const total = rows.reduce((acc, r) => ({ files: acc.files + Number(r.files), bytes: acc.bytes + Number(r.bytes ?? 0) }), { files: 0, bytes: 0 })
    return {
      ...total,
      missing: by.get("missing")?.files ?? 0,
      unreadable: by.get("unreadable")?.files ?? 0,
      changed: by.get("changed")?.files ?? 0
    }
  })

/**
 * The `index-dir` flow.
 *
 * @since 0.1.0
 * @category flows
 */
export const flow = Flow.make({
  id: flowId,
  description: "Index a directory: SHA-256 of every regular file, in durable batches",
  version: "1",
  capabilities: ["db:write:index_dir_files", "fs:read"],
  input: Input,
  handler: (input) =>
    Effect.gen(function*() {
      const run = yield* Run.Run
      const pattern = input.pattern === undefined ? undefined : Glob.compile(input.pattern)
      const batchFiles = input.batchFiles ?? defaultBatchFiles
      const batchBytes = input.batchBytes ?? defaultBatchBytes
      const listing = yield* Step.run(
        "walk",
        Walk.walk(input.root, { pattern }).pipe(Effect.mapError((e) => new Error(e.message))),
        {
          summarize: (l) => ({
            files: l.files.length,
            bytes: l.totalBytes,
            batches: Batches.cut(l.files, batchFiles, batchBytes).length
          })
        }
      )
      const batches = Batches.cut(listing.files, batchFiles, batchBytes)
      const hold = input.holdAt !== undefined && run.drive === 1 ? input.holdAt : undefined
      for (let index = 0; index < batches.length; index++) {
        const name = Batches.stepName(index + 1, batches.length)
        yield* Step.run(name, hashBatch(input.root, name, index + 1, batches[index]!, hold), {
          commit: (value) => insertRows(run.runId, value),
          summarize: (value) => ({
            files: value.results.length,
            bytes: value.results.reduce((sum, r) => sum + r.size, 0),
            resumedAt: value.resumedAt
          })
        })
      }
      const counts = yield* Step.run("summary", countRows(run.runId))
      const stats = yield* Run.stats
      const result: Result = {
        root: input.root,
        files: counts.files,
        bytes: counts.bytes,
        missing: counts.missing,
        unreadable: counts.unreadable,
        changed: counts.changed,
        skipped: listing.skipped,
        batches: batches.length,
        drives: stats.drives,
        takeovers: stats.takeovers,
        resumedFromCheckpoint: stats.resumedFromCheckpoint
      }
      return result
    })
})

/**
 * The migration set of the example (namespace `index-dir`, block 10 000): `0001_files` creates
 * `index_dir_files`.
 *
 * @since 0.1.0
 * @category migrations
 */
export const migrations: Migrations.MigrationSet = {
  namespace: "index-dir",
  idOffset: 10_000,
  migrations: {
    "0001_files": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const int = Dialect.integer(sql)
      yield* sql`CREATE TABLE IF NOT EXISTS index_dir_files (
        run_id TEXT NOT NULL,
        path TEXT NOT NULL CHECK (length(path) > 0),
        size ${int} NOT NULL CHECK (size >= 0),
        sha256 TEXT NULL CHECK (sha256 IS NULL OR length(sha256) = 64),
        mtime_ms ${int} NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('ok', 'missing', 'unreadable', 'changed')),
        batch TEXT NOT NULL,
        attempt ${int} NOT NULL,
        indexed_at_ms ${int} NOT NULL,
        PRIMARY KEY (run_id, path)
      )`
    })
  }
}
