/**
 * `pnpm bench start-many`: `Control.startMany` of 1,000 and 5,000 runs (each one transaction: an approved
 * plan, its token, a launch row, a run created released in its queue, and the run's `control.run.accepted`
 * journal entry per run), side by side with the raw driver (better-sqlite3, node-postgres) doing the same
 * table rows as multi-row INSERTs in one transaction: ms per batch, runs/s and the ratio, medians, plus
 * the statements one facade batch sends.
 *
 * SQLite file always; PostgreSQL when BATON_TEST_PG_URL is set (a fresh schema per size, dropped
 * afterwards). Usage: `pnpm bench start-many [-- --json] [-- --statements]` (`--statements` lists the
 * statements of one batch by text; env BATON_BENCH_START_ITERATIONS, default 5;
 * BATON_BENCH_START_SIZES, default `1000,5000`). `--json` ends with one line
 * `{"startManyMs":{"sqlite":{"1000":x,"5000":x},"pg":{...}},"rawMs":{...}}` (`pg` null when skipped).
 */
import * as Control from "@baton/control/Control"
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { benchFlow, controlStack } from "../lib/controlStack.js"
import * as RawDrivers from "../lib/rawDrivers.js"

const iterations = Number(process.env["BATON_BENCH_START_ITERATIONS"] ?? "5")
const sizes = (process.env["BATON_BENCH_START_SIZES"] ?? "1000,5000").split(",").map(Number)
const json = process.argv.includes("--json")
const shapes = process.argv.includes("--statements")


const flow = benchFlow("a started flow")

const stack = <E>(database: Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, E>) => controlStack([flow], database)

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** The raw side: one transaction of multi-row INSERTs into the same tables, for `n` runs starting at `base`. */
type Raw = (n: number, base: number) => Promise<void>

const rawTables = `CREATE TABLE bench_plans (plan_id TEXT PRIMARY KEY, card_json TEXT NOT NULL);
  CREATE TABLE bench_runs (run_id TEXT PRIMARY KEY, status TEXT NOT NULL, created_at_ms BIGINT NOT NULL, state_json TEXT NOT NULL);
  CREATE TABLE bench_launches (run_id TEXT PRIMARY KEY, queue TEXT NOT NULL, priority INTEGER NOT NULL, available_at_ms BIGINT NOT NULL);
  CREATE TABLE bench_events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, payload_json TEXT NOT NULL, PRIMARY KEY (run_id, seq))`

/** Rows of each raw table, `perRow` parameters each, in statements under the dialect's parameter bound. */
const rawStatements = (n: number, base: number, placeholder: (i: number) => string) => {
  const tables = [
    { head: "INSERT INTO bench_plans (plan_id, card_json) VALUES ", row: (i: number) => [`p${i}`, `{"planId":"p${i}"}`] },
    {
      head: "INSERT INTO bench_runs (run_id, status, created_at_ms, state_json) VALUES ",
      row: (i: number) => [`r${i}`, "suspended", i, `{"runId":"r${i}","status":"accepted"}`]
    },
    {
      head: "INSERT INTO bench_launches (run_id, queue, priority, available_at_ms) VALUES ",
      row: (i: number) => [`r${i}`, "default", 0, i]
    },
    { head: "INSERT INTO bench_events (run_id, seq, payload_json) VALUES ", row: (i: number) => [`r${i}`, 1, `{"runId":"r${i}"}`] }
  ]
  const out: Array<{ text: string; params: Array<unknown> }> = []
  const perChunk = 500
  for (const table of tables) {
    for (let start = 0; start < n; start += perChunk) {
      const params: Array<unknown> = []
      const tuples: Array<string> = []
      for (let i = start; i < Math.min(n, start + perChunk); i++) {
        const values = table.row(base + i)
        tuples.push(`(${values.map((v) => placeholder(params.push(v) - 1)).join(", ")})`)
      }
      out.push({ text: table.head + tuples.join(", "), params })
    }
  }
  return out
}

const sqliteRaw = (filename: string): { readonly raw: Raw; readonly close: () => void } => {
  const Database = RawDrivers.betterSqlite3()
  const db = new Database(filename)
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = NORMAL")
  db.exec(rawTables)
  const raw: Raw = (n, base) => {
    const statements = rawStatements(n, base, () => "?")
    db.transaction(() => {
      for (const s of statements) db.prepare(s.text).run(...s.params)
    }).immediate()
    return Promise.resolve()
  }
  return { raw, close: () => db.close() }
}

const pgRaw = (url: string, schema: string) =>
  Effect.flatMap(RawDrivers.pgClient(url, schema), (client) =>
    Effect.promise(async () => {
      await client.query(rawTables)
      const raw: Raw = async (n, base) => {
        await client.query("BEGIN")
        for (const s of rawStatements(n, base, (i) => `$${i + 1}`)) await client.query(s.text, s.params)
        await client.query("COMMIT")
      }
      return { client, raw }
    }))

interface Sample {
  readonly size: number
  readonly startMs: number
  readonly rawMs: number
  readonly statements: number
}

const measure = (raw: Raw) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const samples: Array<Sample> = []
    let base = 0
    for (const size of sizes) {
      const inputs = Array.from({ length: size }, (_, i) => ({ i }))
      // Warm-up: one small batch through both sides.
      yield* control.startMany({ flowId: flow.flowId, inputs: inputs.slice(0, 50) })
      yield* Effect.promise(() => raw(50, base))
      base += 50
      const starts: Array<number> = []
      const raws: Array<number> = []
      let statements = 0
      for (let k = 0; k < iterations; k++) {
        const sent: Array<string> = []
        const t0 = performance.now()
        const started = yield* Statement.withTransformer(control.startMany({ flowId: flow.flowId, inputs }), (self) => {
          sent.push(self.compile()[0])
          return Effect.succeed(self)
        })
        const t1 = performance.now()
        yield* Effect.promise(() => raw(size, base))
        const t2 = performance.now()
        base += size
        if (started.length !== size || !started.every((s) => s.created)) return yield* Effect.dieMessage("a run was not created")
        starts.push(t1 - t0)
        raws.push(t2 - t1)
        statements = sent.length
        if (shapes && k === 0) {
          const byText = new Map<string, number>()
          for (const text of sent) {
            const key = text.replace(/\s+/g, " ").slice(0, 90)
            byText.set(key, (byText.get(key) ?? 0) + 1)
          }
          process.stdout.write(`  statements of one batch of ${size}:\n`)
          for (const [key, n] of [...byText].sort((a, b) => b[1] - a[1])) process.stdout.write(`  ${String(n).padStart(6)}  ${key}\n`)
        }
      }
      samples.push({ size, startMs: median(starts), rawMs: median(raws), statements })
    }
    return samples
  })

const report = (dialect: string, samples: ReadonlyArray<Sample>) => {
  process.stdout.write(`\n${dialect}: median of ${iterations} batches\n`)
  for (const s of samples) {
    process.stdout.write(
      `  ${String(s.size).padStart(5)} runs  startMany ${s.startMs.toFixed(1).padStart(8)} ms (${
        Math.round(s.size / (s.startMs / 1000)).toLocaleString("en-US").padStart(7)
      } runs/s, ${s.statements} statements)   raw ${s.rawMs.toFixed(1).padStart(7)} ms (${
        Math.round(s.size / (s.rawMs / 1000)).toLocaleString("en-US").padStart(8)
      } runs/s)   ratio ${(s.startMs / s.rawMs).toFixed(1)}\n`
    )
  }
}

const sqlite = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "baton-bench-start-many-"))),
    (created) => Effect.sync(() => fs.rmSync(created, { recursive: true, force: true }))
  )
  const driver = yield* Effect.acquireRelease(
    Effect.sync(() => sqliteRaw(path.join(dir, "raw.db"))),
    (d) => Effect.sync(d.close)
  )
  const samples = yield* measure(driver.raw).pipe(
    Effect.provide(stack(SqliteDatabase.layer({ filename: path.join(dir, "bench.db") })))
  )
  report("SQLite file", samples)
  return samples
}).pipe(Effect.scoped)

const postgres = (url: string) =>
  Effect.gen(function*() {
    const samples = yield* Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [current] = yield* sql<{ schema: string }>`SELECT current_schema() AS schema`
      const driver = yield* pgRaw(url, current!.schema)
      return yield* measure(driver.raw)
    }).pipe(Effect.provide(stack(TestDatabase.layerPostgres(url))), Effect.scoped)
    report("PostgreSQL", samples)
    return samples
  })

const main = Effect.gen(function*() {
  process.stdout.write(
    `Control.startMany vs the same rows as multi-row INSERTs through the raw driver (load average ${
      os.loadavg().map((l) => l.toFixed(1)).join(" ")
    } on ${os.cpus().length} cores):\n`
  )
  const onSqlite = yield* sqlite
  const url = process.env["BATON_TEST_PG_URL"]
  const onPg = url === undefined || url === "" ? undefined : yield* postgres(url)
  if (onPg === undefined) process.stdout.write("\n  PostgreSQL skipped (BATON_TEST_PG_URL is unset)\n")
  if (json) {
    const bySize = (samples: ReadonlyArray<Sample> | undefined, pick: (s: Sample) => number) =>
      samples === undefined ? null : Object.fromEntries(samples.map((s) => [String(s.size), Math.round(pick(s) * 10) / 10]))
    process.stdout.write(`${JSON.stringify({
      startManyMs: { sqlite: bySize(onSqlite, (s) => s.startMs), pg: bySize(onPg, (s) => s.startMs) },
      rawMs: { sqlite: bySize(onSqlite, (s) => s.rawMs), pg: bySize(onPg, (s) => s.rawMs) }
    })}\n`)
  }
})

Effect.runPromise(main).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
