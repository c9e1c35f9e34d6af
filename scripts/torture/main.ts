/**
 * `pnpm torture [-- options]`: P worker processes (`worker.ts`) own, heartbeat, steal and complete
 * R runs on a SQLite file and on a fresh PostgreSQL schema, while a chaos loop SIGKILLs workers
 * (restarting them), SIGSTOPs them for longer than the 30 s stale cutoff and SIGCONTs them. Then
 * `checker.ts` reads the history back and every finding is a violation. Prints one JSON line and
 * exits non-zero on any violation.
 *
 * Runs are created as workers need them (about `--pool` live at a time) while the chaos lasts;
 * then the chaos stops and the live runs drain. Options: `--short` (the CI size, about 3 minutes,
 * both dialects at once: chaos for 100 s, at most 2000 runs), `--runs R` (default 3000: chaos until
 * R runs are created), `--workers P` (6), `--steps S` (4), `--step-ms` (mean work per step, 500),
 * `--slots` (runs in flight per worker, 3), `--pool` (36), `--stop-percent` (share of chaos
 * events that are stops rather than kills, 50), `--dialect sqlite|pg|both` (both),
 * `--chaos-ms` (chaos lasts at most this long), `--drain-ms` (180000: a run still live this long
 * after the chaos is a violation). The stale cutoff is the library's fixed 30 s, so every SIGSTOP
 * lasts 33–39 s and draining takes at least one cutoff after the last kill.
 * PostgreSQL: `BATON_TORTURE_PG_URL`, `BATON_TEST_PG_URL` or postgres://postgres@127.0.0.1:5432/postgres.
 */
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as SqlConsensus from "@baton/journal/SqlConsensus"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as Migrations from "@baton/run-store/Migrations"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, ManagedRuntime } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import * as Checker from "./checker.js"

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const workerScript = path.join(repoRoot, "scripts/torture/worker.ts")
const pgModule = createRequire(path.join(repoRoot, "packages/database/package.json"))("pg")

const argv = process.argv.slice(2).filter((a) => a !== "--")
const flag = (name: string) => argv.includes(`--${name}`)
const option = (name: string, fallback: number): number => {
  const i = argv.indexOf(`--${name}`)
  if (i < 0) return fallback
  const value = Number(argv[i + 1])
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} must be a non-negative integer`)
  return value
}
const short = flag("short")
const staleAfterMs = 30_000
const config = {
  runs: option("runs", short ? 2000 : 3000),
  workers: option("workers", 6),
  steps: option("steps", 4),
  stepMs: option("step-ms", 500),
  slots: option("slots", 3),
  pool: option("pool", 36),
  stopShare: option("stop-percent", 50),
  chaosMs: option("chaos-ms", short ? 100_000 : 24 * 3600_000),
  drainMs: option("drain-ms", 180_000)
}
const dialectArg = (() => {
  const i = argv.indexOf("--dialect")
  return i < 0 ? "both" : argv[i + 1]!
})()
const dialects = dialectArg === "both" ? ["sqlite", "pg"] as const : [dialectArg as "sqlite" | "pg"]
const pgUrl = process.env["BATON_TORTURE_PG_URL"] ?? process.env["BATON_TEST_PG_URL"] ??
  "postgres://postgres@127.0.0.1:5432/postgres"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const between = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1))
const pick = <A>(list: ReadonlyArray<A>): A | undefined => list[Math.floor(Math.random() * list.length)]
const log = (line: string) => process.stderr.write(`[torture] ${line}\n`)

type Dialect = "sqlite" | "pg"

const stackOf = (dialect: Dialect, target: string, schema: string | undefined) =>
  Layer.provideMerge(
    Layer.mergeAll(RunStore.layerWith, SqlJournal.layerWith()),
    Layer.provideMerge(
      SqlConsensus.layer,
      Layer.provideMerge(
        DatabaseMigrations.layer([JournalMigrations.set, Migrations.set]),
        dialect === "sqlite"
          ? SqliteDatabase.layer({ filename: target })
          : PgDatabase.layer({ url: target, schema: schema!, maxConnections: 4 })
      )
    )
  )

/** The application table: no uniqueness, so a doubled step commit stays visible to the checker. */
const createEffectsTable = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.zipRight(
    sql`CREATE TABLE torture_effects (run_id TEXT NOT NULL, step INTEGER NOT NULL, owner TEXT NOT NULL,
      fence INTEGER NOT NULL, journal_seq INTEGER NOT NULL)`,
    sql`CREATE INDEX torture_effects_run_idx ON torture_effects (run_id)`
  ))

const readHistory = (runIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const runs = yield* sql<{ run_id: string; status: string }>`SELECT run_id, status FROM flows_runs`
    const events = yield* sql<{ run_id: string; seq: unknown; event_type: string; payload_json: string }>`
      SELECT run_id, seq, event_type, payload_json FROM flows_journal_events
      WHERE event_type LIKE 'torture.%' OR run_id LIKE 'flows.companion/run-store/%'`
    const attempts = yield* sql<{ run_id: string; step_key_digest: string; attempt: unknown; state: string; meta_json: string }>`
      SELECT run_id, step_key_digest, attempt, state, meta_json FROM flows_attempts`
    const effects = yield* sql<{ run_id: string; step: unknown; owner: string; fence: unknown; journal_seq: unknown }>`
      SELECT run_id, step, owner, fence, journal_seq FROM torture_effects`
    const ownerKey = (o: { hostId: string; pid: number; nonce: string }) => `${o.hostId}/${o.pid}/${o.nonce}`
    const entries: Array<Checker.Entry> = []
    const facts: Array<Checker.Fact> = []
    for (const e of events) {
      const payload = JSON.parse(e.payload_json)
      if (e.run_id.startsWith("flows.companion/")) {
        facts.push({
          runId: payload.runId,
          seq: Number(e.seq),
          transition: e.event_type.replace("flows.consensus.", ""),
          owner: ownerKey(payload.owner)
        })
      } else {
        entries.push({
          runId: e.run_id,
          seq: Number(e.seq),
          eventType: e.event_type as Checker.Entry["eventType"],
          owner: payload.owner,
          fence: payload.fence ?? null,
          step: payload.step ?? null
        })
      }
    }
    const history: Checker.History = {
      expectedRuns: runIds,
      steps: config.steps,
      runs: runs.map((r) => ({ runId: r.run_id, status: r.status })),
      entries,
      facts,
      attempts: attempts.map((a) => ({
        runId: a.run_id,
        step: Number(a.step_key_digest.replace("step-", "")),
        attempt: Number(a.attempt),
        state: a.state,
        owner: JSON.parse(a.meta_json).owner
      })),
      effects: effects.map((e) => ({
        runId: e.run_id,
        step: Number(e.step),
        owner: e.owner,
        fence: Number(e.fence),
        journalSeq: Number(e.journal_seq)
      }))
    }
    return history
  })

interface Slot {
  child: ChildProcess
  stopped: boolean
  alive: boolean
  /** When the worker said it was ready (its stores built), if it has. */
  readyAt: number | undefined
}

const torture = async (dialect: Dialect) => {
  const started = Date.now()
  const dir = dialect === "sqlite" ? fs.mkdtempSync(path.join(os.tmpdir(), "baton-torture-")) : undefined
  const file = dir === undefined ? undefined : path.join(dir, "torture.db")
  const schema = dialect === "pg" ? `torture_${randomBytes(6).toString("hex")}` : undefined
  const admin = async (text: string) => {
    const client = new pgModule.Client({ connectionString: pgUrl })
    await client.connect()
    try {
      await client.query("SET client_min_messages = warning")
      await client.query(text)
    } finally {
      await client.end()
    }
  }
  if (schema !== undefined) await admin(`CREATE SCHEMA ${schema}`)
  const target = file ?? pgUrl
  const runtime = ManagedRuntime.make(stackOf(dialect, target, schema))
  const workers: Array<Slot> = []
  const timers = new Set<NodeJS.Timeout>()
  const later = (ms: number, f: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t)
      f()
    }, ms)
    timers.add(t)
  }
  const reported = new Map<number, Record<string, number>>()
  const errors = new Set<string>()
  const chaos = { kills: 0, stops: 0, conts: 0, restarts: 0 }
  let finishing = false
  try {
    const runIds: Array<string> = []
    await runtime.runPromise(createEffectsTable)
    // Runs are created as they are needed, keeping about `pool` live, so a slow machine makes
    // fewer runs rather than leaving created ones unfinished at the end.
    const createMore = (n: number) => {
      const ids = Array.from({ length: n }, (_, i) => `run-${runIds.length + i}`)
      return runtime.runPromise(
        Effect.flatMap(RunStore.RunStore, (store) =>
          Effect.forEach(ids, (id) => store.create(id, "{}"), { concurrency: dialect === "pg" ? 4 : 1, discard: true }))
      ).then(() => runIds.push(...ids))
    }
    await createMore(Math.min(config.pool, config.runs))

    const args = [
      ...(dialect === "sqlite" ? ["sqlite", file!] : ["pg", pgUrl, schema!]),
      String(config.steps),
      String(config.stepMs),
      String(config.slots)
    ]
    const spawnWorker = (index: number) => {
      const child = spawn(process.execPath, ["--import", "tsx", workerScript, ...args], {
        cwd: repoRoot,
        env: { ...process.env, TSX_TSCONFIG_PATH: path.join(repoRoot, "tsconfig.base.json") },
        stdio: ["ignore", "pipe", "pipe"]
      })
      const slot: Slot = { child, stopped: false, alive: true, readyAt: undefined }
      workers[index] = slot
      readline.createInterface({ input: child.stdout! }).on("line", (line) => {
        if (!line.startsWith("{")) return
        const message = JSON.parse(line)
        if (message.ready === true) slot.readyAt = Date.now()
        if (message.counts !== undefined) reported.set(message.pid, message.counts)
        for (const e of message.errors ?? []) if (errors.size < 20) errors.add(e)
      })
      let stderr = ""
      child.stderr!.on("data", (c) => {
        stderr = (stderr + String(c)).slice(-2000)
        if (process.env["BATON_TORTURE_DEBUG"] === "1") process.stderr.write(String(c))
      })
      child.on("exit", (code, signal) => {
        slot.alive = false
        if (!finishing && signal !== "SIGKILL") log(`${dialect}: worker ${child.pid} exited ${code ?? signal}: ${stderr}`)
        if (!finishing) {
          // Restart whatever died, killed or not, so the pool stays at P workers.
          later(between(500, 1500), () => {
            if (finishing) return
            chaos.restarts++
            spawnWorker(index)
          })
        }
      })
    }
    for (let i = 0; i < config.workers; i++) spawnWorker(i)

    const live = () =>
      runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ n: unknown }>`SELECT count(*) AS n FROM flows_runs
          WHERE status NOT IN ('completed', 'failed', 'cancelled')`)).then((rows) => Number(rows[0]!.n))

    const chaosEnd = Date.now() + config.chaosMs
    const maxStopped = Math.max(1, Math.floor(config.workers / 3))
    /** Chaos lasts while runs are still being created. */
    const chaosOn = () => !finishing && runIds.length < config.runs && Date.now() < chaosEnd
    const chaosEvent = () => {
      // Victims are workers that have been working a while: killing one still starting proves nothing.
      const running = workers.filter((w) => w.alive && !w.stopped && w.readyAt !== undefined && Date.now() - w.readyAt > 3000)
      const stopped = workers.filter((w) => w.alive && w.stopped)
      const stopMs = staleAfterMs + between(3000, 9000)
      if (stopped.length < maxStopped && Date.now() + stopMs < chaosEnd && Math.random() < config.stopShare / 100 && running.length > 0) {
        const w = pick(running)!
        w.child.kill("SIGSTOP")
        w.stopped = true
        log(`${dialect}: SIGSTOP ${w.child.pid} for ${stopMs} ms`)
        chaos.stops++
        later(stopMs, () => {
          if (!w.alive) return
          w.child.kill("SIGCONT")
          w.stopped = false
          chaos.conts++
        })
        return
      }
      // Now and then the victim is a stopped worker: a kill that lands while it is frozen.
      const w = Math.random() < 0.05 && stopped.length > 0 ? pick(stopped)! : pick(running)
      if (w === undefined) return
      w.child.kill("SIGKILL")
      chaos.kills++
      log(`${dialect}: SIGKILL ${w.child.pid}`)
    }
    // Its own loop, so slow run creation (a frozen SQLite writer holds the lock) never delays it.
    const chaosLoop = (async () => {
      await sleep(between(2000, 4000))
      while (chaosOn()) {
        chaosEvent()
        await sleep(between(3000, 6000))
      }
    })()

    let drainEnd: number | undefined
    let remaining = runIds.length
    let lastProgress = Date.now()
    while (true) {
      await sleep(500)
      const left = await live().catch(() => remaining)
      if (left !== remaining) lastProgress = Date.now()
      remaining = left
      if (chaosOn()) {
        if (remaining < config.pool) {
          await createMore(Math.min(config.pool - remaining, config.runs - runIds.length)).catch((e) =>
            log(`${dialect}: create failed: ${String(e).split("\n")[0]}`)
          )
        }
      } else {
        drainEnd ??= Date.now() + config.drainMs
        if (remaining === 0 || Date.now() > drainEnd) break
      }
      if (Date.now() - lastProgress > 15_000) {
        log(`${dialect}: ${remaining} runs live, no progress for ${Math.round((Date.now() - lastProgress) / 1000)} s`)
        lastProgress = Date.now()
      }
    }
    finishing = true
    await chaosLoop
    for (const t of timers) clearTimeout(t)
    const closing = workers.filter((w) => w.alive).map((w) =>
      new Promise<void>((resolve) => {
        w.child.once("exit", () => resolve())
        if (w.stopped) w.child.kill("SIGCONT")
        w.child.kill("SIGKILL")
      })
    )
    await Promise.all(closing)
    const history = await runtime.runPromise(readHistory(runIds))
    const report = Checker.check(history)
    const workerCounts: Record<string, number> = {}
    for (const counts of reported.values()) {
      for (const [k, v] of Object.entries(counts)) workerCounts[k] = (workerCounts[k] ?? 0) + v
    }
    return {
      dialect,
      seconds: Math.round((Date.now() - started) / 100) / 10,
      ...chaos,
      ...report,
      findings: report.findings.slice(0, 50),
      workerCounts,
      workerErrors: [...errors]
    }
  } finally {
    finishing = true
    for (const t of timers) clearTimeout(t)
    for (const w of workers) {
      if (w?.alive) {
        w.child.kill("SIGCONT")
        w.child.kill("SIGKILL")
      }
    }
    await runtime.dispose()
    if (schema !== undefined) await admin(`DROP SCHEMA ${schema} CASCADE`)
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  }
}

const started = Date.now()
const results = await Promise.all(dialects.map(torture))
const total = (key: "runs" | "kills" | "stops" | "steals" | "violations") => results.reduce((n, r) => n + r[key], 0)
process.stdout.write(
  JSON.stringify({
    runs: total("runs"),
    kills: total("kills"),
    stops: total("stops"),
    steals: total("steals"),
    violations: total("violations"),
    findings: results.flatMap((r) => r.findings.map((f) => ({ dialect: r.dialect, ...f }))),
    seconds: Math.round((Date.now() - started) / 100) / 10,
    config: { ...config, dialects },
    dialects: Object.fromEntries(results.map((r) => [r.dialect, r]))
  }) + "\n"
)
process.exit(total("violations") === 0 ? 0 : 1)
