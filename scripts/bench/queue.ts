/**
 * `pnpm bench -- queue [--short] [--json] [--only=a,b]`: Baton as a work queue, side by side with
 * graphile-worker, pg-boss and DBOS Transact on one PostgreSQL (each in a fresh schema it drops
 * afterwards), plus Baton on a SQLite file.
 *
 * - W1: 2,000 no-op jobs enqueued, then one worker process drains them.
 * - W3: the same with 4 worker processes; every job must run exactly once (the handlers' own count,
 *   and the system's bookkeeping: Baton's journal, pg-boss retries, DBOS dequeues).
 * - W2: 500 three-step workflows started and awaited in one worker process, one at a time and 64 at
 *   once (DBOS and Baton; graphile-worker and pg-boss have no workflows).
 * - Wake (Baton): an idle host with the defaults (`pollInterval` 1 s), past its startup sweep; 100 runs
 *   started one at a time, each after ~300 ms with nothing to do. PostgreSQL: the host is a worker
 *   process and this process starts the runs (client mode), so the host learns of each from the work
 *   channel's notification; SQLite: the host's own process starts them, handing each to its executor.
 *   Latency from the start's `COMMIT` (when the driver is sent it, so the commit itself is included) to
 *   the handler's first line, split at the host process's first statement after the commit (its reaction
 *   to the wake, then the claim and the drive's start, with the statements they send).
 * - List (Baton): `Control.list` pages of 50 against the same keyset SELECT through the raw driver, the
 *   measurement of `pnpm bench -- control-list` (`control-list/listPage.ts`) at 1,000,000 runs.
 *
 * Each worker is its own process (`scripts/bench/queue/worker.ts`): it reports its handler starts,
 * its CPU and its peak RSS over IPC. jobs/s is from the end of the enqueue (W1/W3; the workers start
 * taking jobs then) or the first start call (W2) to the last job durably done (W1/W3: the parent
 * polls the system's tables every 20 ms) or the last result (W2). Latency is from a job's
 * availability (W1/W3: the end of the enqueue, when the workers are let go; W2: its start call) to
 * its handler's first line. Times across processes are the kernel clock (`performance.timeOrigin + now`).
 * `--short`: 300 jobs, 60 workflows, 30 wakes, 100,000 listed runs (100 iterations instead of 300).
 * `--only=` takes systems (`baton-pg,dbos` runs those alone) and parts (`queue` W1/W3, `workflows` W2,
 * `wake`, `list`; `--only=wake,list` runs only Baton's wake and list measurements; wake and list follow
 * `baton-pg`/`baton-sqlite` when systems are named too).
 * PostgreSQL: `BATON_BENCH_PG_URL`, else `BATON_TEST_PG_URL`, else postgres://postgres@127.0.0.1:5432/postgres.
 * `--json` ends with one JSON line: `w1`, `w3`, `w2` (64 at once), `w2seq` (one at a time), each
 * `{ system: { perS, p50Ms, p99Ms, cpuMsPerJob, rssMb } }`, `w2.<baton>.transactionsPerWorkflow`,
 * `wakeP50Ms` and `wakeP99Ms` (`{ pg, sqlite }`), `listPageMs` and `listRawMs` (`{ sqlite, pg }`, medians
 * pooled over the first and a deep page); null where a part did not run.
 */
import { type ChildProcess, fork } from "node:child_process"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import * as ListPage from "./control-list/listPage.js"
import * as Baton from "./queue/baton.js"
import {
  type Figures,
  type FromWorker,
  nowMs,
  quantile,
  round,
  type System,
  type SystemName,
  systems,
  type Target,
  type WorkerReport
} from "./queue/common.js"
import * as Dbos from "./queue/dbos.js"
import * as Graphile from "./queue/graphile.js"
import { closePool } from "./queue/pg.js"
import * as PgBoss from "./queue/pgboss.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const workerScript = path.join(here, "queue", "worker.ts")
const args = process.argv.slice(2)
const short = args.includes("--short")
const asJson = args.includes("--json")
const only = args.find((a) => a.startsWith("--only="))?.slice("--only=".length).split(",") ?? []
const parts = ["queue", "workflows", "wake", "list"] as const
type Part = typeof parts[number]
const isPart = (word: string): word is Part => (parts as ReadonlyArray<string>).includes(word)
const onlyParts = only.filter(isPart)
const onlySystems = only.filter((word) => !isPart(word))
const runsPart = (part: Part) => onlyParts.length === 0 || onlyParts.includes(part)
const jobs = short ? 300 : 2000
const workflows = short ? 60 : 500
const wakeCount = short ? 30 : 100
const wakeGapMs = 300
const listRuns = short ? 100_000 : 1_000_000
const listIterations = short ? 100 : 300
const url = process.env["BATON_BENCH_PG_URL"] ?? process.env["BATON_TEST_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"
// No progress for this long means a stuck system: it is reported as failed and the bench goes on.
const stallMs = 120_000

const parents: Record<SystemName, System> = {
  "baton-pg": Baton.system(false),
  "baton-sqlite": Baton.system(true),
  pgboss: PgBoss.system,
  graphile: Graphile.system,
  dbos: Dbos.system
}
const selected = <N extends SystemName>(names: ReadonlyArray<N>): Array<N> => names.filter((n) => onlySystems.length === 0 || onlySystems.includes(n))
const queueSystems = runsPart("queue") ? selected(["graphile", "pgboss", "dbos", "baton-pg", "baton-sqlite"]) : []
const workflowSystems = runsPart("workflows") ? selected(["dbos", "baton-pg", "baton-sqlite"]) : []
const wakeSystems = runsPart("wake") ? selected(["baton-pg", "baton-sqlite"]) : []
const listSystems = runsPart("list") ? selected(["baton-sqlite", "baton-pg"]) : []

const say = (text: string) => process.stdout.write(`${text}\n`)

/** A worker process and its messages. */
const spawnWorker = (system: SystemName, argv: ReadonlyArray<string>) => {
  const child: ChildProcess = fork(workerScript, [system, ...argv], {
    // DBOS calls node-postgres in a way pg 8 warns about on every process; the warning is not ours.
    execArgv: ["--import", "tsx", "--disable-warning=DeprecationWarning"],
    env: { ...process.env, PGOPTIONS: "--client-min-messages=warning" },
    stdio: ["ignore", "inherit", "inherit", "ipc"]
  })
  const waiters: Array<{ type: FromWorker["type"]; resolve: (m: FromWorker) => void }> = []
  let failure: Error | undefined
  const fail = (error: Error) => {
    failure ??= error
    for (const w of waiters.splice(0)) w.resolve({ type: "error", message: error.message })
  }
  child.on("message", (message: FromWorker) => {
    if (message.type === "error") return fail(new Error(`${system} worker: ${message.message}`))
    const index = waiters.findIndex((w) => w.type === message.type)
    if (index >= 0) waiters.splice(index, 1)[0]!.resolve(message)
  })
  child.on("exit", (code) => {
    if (waiters.length > 0) fail(new Error(`${system} worker exited (${code}) before answering`))
  })
  const next = async <T extends FromWorker["type"]>(type: T, timeoutMs: number): Promise<Extract<FromWorker, { type: T }>> => {
    if (failure !== undefined) throw failure
    const message = await new Promise<FromWorker>((resolve) => {
      waiters.push({ type, resolve })
      setTimeout(() => resolve({ type: "error", message: `${system} worker: no ${type} within ${timeoutMs} ms` }), timeoutMs).unref()
    })
    if (message.type === "error") throw failure ?? new Error(message.message)
    return message as Extract<FromWorker, { type: T }>
  }
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null) resolve()
    else child.on("exit", () => resolve())
  })
  return { child, next, exited }
}
type Worker = ReturnType<typeof spawnWorker>

/** Let the workers finish their own shutdown (they exit after their report), killing any still there after 10 s. */
const stopAll = async (workers: ReadonlyArray<Worker>) => {
  const grace = new Promise((resolve) => setTimeout(resolve, 10_000).unref())
  await Promise.race([Promise.all(workers.map((w) => w.exited)), grace])
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL")
  await Promise.all(workers.map((w) => w.exited))
}

/** One workload run of a queue system: W1 with 1 worker, W3 with 4. */
interface QueueResult {
  readonly figures: Figures
  readonly ranTwice: number
  readonly missing: number
  readonly bookkeepingTwice: number | undefined
  readonly enqueueMs: number
}

const figuresOf = (
  n: number,
  windowMs: number,
  latencies: ReadonlyArray<number>,
  reports: ReadonlyArray<WorkerReport>
): Figures => ({
  perS: round(n / (windowMs / 1000)),
  p50Ms: round(quantile(latencies, 0.5) ?? NaN),
  p99Ms: round(quantile(latencies, 0.99) ?? NaN),
  cpuMsPerJob: round(reports.reduce((sum, r) => sum + r.cpuMs, 0) / n, 2),
  rssMb: round(Math.max(...reports.map((r) => r.rssMb)))
})

/** First start per job index, and how many executions beyond one / jobs never started. */
const tally = (n: number, reports: ReadonlyArray<WorkerReport>) => {
  const first: Array<number | undefined> = new Array(n)
  const executions = new Array<number>(n).fill(0)
  for (const report of reports) {
    for (const [index, at] of report.starts) {
      executions[index] = (executions[index] ?? 0) + 1
      if (first[index] === undefined || at < first[index]!) first[index] = at
    }
  }
  return {
    first,
    ranTwice: executions.reduce((sum, e) => sum + Math.max(0, e - 1), 0),
    missing: executions.filter((e) => e === 0).length
  }
}

const runQueue = async (name: SystemName, workerCount: number): Promise<QueueResult> => {
  const system = parents[name]
  const target: Target = await system.prepare(url)
  const workers: Array<Worker> = []
  try {
    if (name.startsWith("baton")) await system.completed(target) // migrates before any host opens
    // One at a time: the first one creates a peer's tables, the others find them.
    for (let k = 0; k < workerCount; k++) {
      const w = spawnWorker(name, ["work", JSON.stringify(target)])
      workers.push(w)
      await w.next("ready", stallMs)
    }
    const enqueueStart = nowMs()
    const availableAt = await system.enqueue(target, jobs)
    const enqueuedAt = nowMs()
    for (const w of workers) w.child.send({ type: "go" })
    let done = 0
    let lastProgress = nowMs()
    for (;;) {
      const now = await system.completed(target)
      if (now >= jobs) break
      if (now > done) {
        done = now
        lastProgress = nowMs()
      } else if (nowMs() - lastProgress > stallMs) {
        throw new Error(`${name}: stalled at ${done} of ${jobs} jobs done`)
      }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const doneAt = nowMs()
    const replies = workers.map((w) => w.next("report", stallMs))
    for (const w of workers) w.child.send({ type: "stop" })
    const reports = (await Promise.all(replies)).map((m) => m.report)
    const counted = tally(jobs, reports)
    // No worker takes a job before `go`: a job launched earlier in the enqueue (Baton's are launched
    // one by one) is available from then on, as a peer's batch is from its commit.
    const latencies = counted.first.flatMap((at, i) => (at === undefined ? [] : [at - Math.max(availableAt[i]!, enqueuedAt)]))
    const bookkeepingTwice = await system.verify(target)
    return {
      figures: figuresOf(jobs, doneAt - enqueuedAt, latencies, reports),
      ranTwice: counted.ranTwice,
      missing: counted.missing,
      bookkeepingTwice,
      enqueueMs: enqueuedAt - enqueueStart
    }
  } finally {
    await stopAll(workers)
    await system.drop(target)
  }
}

interface WorkflowResult {
  readonly figures: Figures
  readonly transactionsPerWorkflow: number | null
  readonly statementsPerWorkflow: number | null
}

const runWorkflows = async (name: SystemName, concurrency: number): Promise<WorkflowResult> => {
  const system = parents[name]
  const target = await system.prepare(url)
  const w = spawnWorker(name, ["workflows", JSON.stringify(target), String(workflows), String(concurrency)])
  try {
    const { report } = await w.next("report", Math.max(stallMs, workflows * 2000))
    const counted = tally(workflows, [report])
    if (counted.ranTwice > 0 || counted.missing > 0) {
      throw new Error(`${name}: ${counted.ranTwice} extra executions, ${counted.missing} workflows never started`)
    }
    const latencies = counted.first.map((at, i) => at! - report.availableAt![i]!)
    return {
      figures: figuresOf(workflows, report.t1Ms! - report.t0Ms!, latencies, [report]),
      transactionsPerWorkflow: report.counts === undefined ? null : round(report.counts.writeTransactions / workflows, 2),
      statementsPerWorkflow: report.counts === undefined ? null : round(report.counts.statements / workflows, 1)
    }
  } finally {
    await stopAll([w])
    await system.drop(target)
  }
}

/**
 * Wake latency of an idle Baton host: PostgreSQL with the starter in this process and the host in a
 * worker (the host hears the start's notification), SQLite with both in the worker (the start hands
 * the run to the host's own executor). Answers per run: commit sent → handler's first line (`total`),
 * split at the host process's first statement after the commit (`reaction`: the wake itself; `work`: the
 * claim and the drive's start, `statements` of them).
 */
interface WakeResult {
  readonly total: ReadonlyArray<number>
  readonly reaction: ReadonlyArray<number>
  readonly work: ReadonlyArray<number>
  readonly statements: ReadonlyArray<number>
}

const runWake = async (name: "baton-pg" | "baton-sqlite"): Promise<WakeResult> => {
  const system = parents[name]
  const target = await system.prepare(url)
  const workers: Array<Worker> = []
  const timeoutMs = stallMs + wakeCount * 2000
  try {
    await system.completed(target) // migrates before the host opens
    let report: WorkerReport
    let made: ReadonlyArray<Baton.WakeStart>
    if (name === "baton-sqlite") {
      const w = spawnWorker(name, ["wake-self", JSON.stringify(target), String(wakeCount), String(wakeGapMs)])
      workers.push(w)
      report = (await w.next("report", timeoutMs)).report
      made = report.wake?.starts ?? []
    } else {
      const w = spawnWorker(name, ["wake-host", JSON.stringify(target)])
      workers.push(w)
      await w.next("ready", stallMs)
      const starter = Baton.wakeStarter(target)
      try {
        made = await Baton.startWhileIdle(wakeCount, wakeGapMs, starter.start)
      } finally {
        await starter.close()
      }
      const reply = w.next("report", stallMs)
      w.child.send({ type: "stop" })
      report = (await reply).report
    }
    const counted = tally(wakeCount, [report])
    if (counted.ranTwice > 0 || counted.missing > 0) {
      throw new Error(`${name}: ${counted.ranTwice} extra executions, ${counted.missing} runs never started`)
    }
    if (made.length !== wakeCount || made.some((m) => Number.isNaN(m.committedAtMs))) {
      throw new Error(`${name}: a start's commit was not seen at the driver`)
    }
    const sentAt = report.wake?.sentAt ?? []
    const total = counted.first.map((at, i) => at! - made[i]!.committedAtMs)
    const reaction: Array<number> = []
    const work: Array<number> = []
    const statements: Array<number> = []
    for (const [i, m] of made.entries()) {
      const body = counted.first[i]!
      const first = sentAt.find((at) => at > m.committedAtMs)
      if (first === undefined || first > body) continue
      reaction.push(first - m.committedAtMs)
      work.push(body - first)
      statements.push(sentAt.filter((at) => at >= first && at <= body).length)
    }
    return { total, reaction, work, statements }
  } finally {
    await stopAll(workers)
    await system.drop(target)
  }
}

const empty: Figures = { perS: null, p50Ms: null, p99Ms: null, cpuMsPerJob: null, rssMb: null }
const cell = (value: number | null | undefined, width: number) => (value === null || value === undefined || Number.isNaN(value) ? "-" : String(value)).padStart(width)

const table = (title: string, rows: ReadonlyArray<readonly [string, Figures, string]>) => {
  say(`\n${title}`)
  say(`  ${"system".padEnd(13)} ${"jobs/s".padStart(9)} ${"p50 ms".padStart(9)} ${"p99 ms".padStart(9)} ${"CPU ms/job".padStart(11)} ${"RSS MB".padStart(8)}  notes`)
  for (const [name, f, notes] of rows) {
    say(`  ${name.padEnd(13)} ${cell(f.perS, 9)} ${cell(f.p50Ms, 9)} ${cell(f.p99Ms, 9)} ${cell(f.cpuMsPerJob, 11)} ${cell(f.rssMb, 8)}  ${notes}`)
  }
}

const ratio = (a: number | null | undefined, b: number | null | undefined) =>
  a === null || a === undefined || b === null || b === undefined || b === 0 ? "-" : `${round(a / b, 2)} ×`

const ratios = (label: string, all: Partial<Record<SystemName, Figures>>) => {
  const results = Object.fromEntries(Object.entries(all).filter(([, f]) => f.perS !== null)) as Partial<Record<SystemName, Figures>>
  const baton = results["baton-pg"]
  const lines: Array<string> = []
  for (const peer of ["graphile", "pgboss", "dbos"] as const) {
    const other = results[peer]
    if (baton === undefined || other === undefined) continue
    lines.push(
      `  baton-pg vs ${peer.padEnd(8)}: jobs/s ${ratio(baton.perS, other.perS)}, CPU/job ${ratio(baton.cpuMsPerJob, other.cpuMsPerJob)}, RSS ${ratio(baton.rssMb, other.rssMb)}`
    )
  }
  const sqlite = results["baton-sqlite"]
  if (sqlite !== undefined && baton !== undefined) lines.push(`  baton-sqlite vs baton-pg: jobs/s ${ratio(sqlite.perS, baton.perS)}`)
  if (sqlite !== undefined && results.dbos !== undefined) lines.push(`  baton-sqlite vs dbos    : jobs/s ${ratio(sqlite.perS, results.dbos.perS)}`)
  if (lines.length > 0) say(`${label} ratios:\n${lines.join("\n")}`)
}

const main = async () => {
  say(`queue bench: ${jobs} jobs, ${workflows} workflows; ${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}; PostgreSQL ${url.replace(/\/\/[^@]*@/, "//")}`)
  const out: Record<"w1" | "w3" | "w2" | "w2seq", Record<string, Figures & { transactionsPerWorkflow?: number | null }>> = {
    w1: {},
    w3: {},
    w2: {},
    w2seq: {}
  }
  for (const name of systems) {
    out.w1[name] = empty
    out.w3[name] = empty
    out.w2[name] = empty
    out.w2seq[name] = empty
  }
  let failures = 0
  for (const [key, count] of queueSystems.length === 0 ? [] : [["w1", 1], ["w3", 4]] as const) {
    const rows: Array<readonly [string, Figures, string]> = []
    for (const name of queueSystems) {
      try {
        const result = await runQueue(name, count)
        out[key][name] = result.figures
        const bookkeeping = result.bookkeepingTwice === undefined ? "" : `, ${result.bookkeepingTwice} by its own records`
        rows.push([
          name,
          result.figures,
          `ran twice ${result.ranTwice}${bookkeeping}; never ran ${result.missing}; enqueue ${round(result.enqueueMs / 1000, 2)} s`
        ])
        if (result.ranTwice > 0 || result.missing > 0 || (result.bookkeepingTwice ?? 0) > 0) failures++
      } catch (error) {
        failures++
        rows.push([name, empty, `failed: ${error instanceof Error ? error.message : String(error)}`])
      }
    }
    table(`${key.toUpperCase()}: ${jobs} no-op jobs, ${count} worker process${count === 1 ? "" : "es"}`, rows)
    ratios(key.toUpperCase(), out[key])
  }
  if (queueSystems.length > 0) say("W3 vs W1 (4 workers ÷ 1):")
  for (const name of queueSystems) say(`  ${name.padEnd(13)} ${ratio(out.w3[name]?.perS, out.w1[name]?.perS)}`)
  for (const [key, concurrency] of workflowSystems.length === 0 ? [] : [["w2seq", 1], ["w2", 64]] as const) {
    const rows: Array<readonly [string, Figures, string]> = []
    for (const name of workflowSystems) {
      try {
        const result = await runWorkflows(name, concurrency)
        out[key][name] = name.startsWith("baton")
          ? { ...result.figures, transactionsPerWorkflow: result.transactionsPerWorkflow }
          : result.figures
        rows.push([
          name,
          result.figures,
          result.transactionsPerWorkflow === null
            ? ""
            : `${result.transactionsPerWorkflow} write transactions, ${result.statementsPerWorkflow} statements per workflow`
        ])
      } catch (error) {
        failures++
        rows.push([name, empty, `failed: ${error instanceof Error ? error.message : String(error)}`])
      }
    }
    table(`W2${key === "w2seq" ? " sequential" : " 64 concurrent"}: ${workflows} workflows of 3 steps, started and awaited in one process`, rows)
    ratios(key === "w2seq" ? "W2 sequential" : "W2 concurrent", out[key])
  }
  const wake: Record<"p50" | "p99", { pg: number | null; sqlite: number | null }> = {
    p50: { pg: null, sqlite: null },
    p99: { pg: null, sqlite: null }
  }
  if (wakeSystems.length > 0) {
    say(`\nWake: an idle host (default pollInterval 1 s), ${wakeCount} runs started one at a time, each after ~${wakeGapMs} ms idle; latency from the start's COMMIT (as sent) to the handler's first line`)
    say(`  ${"system".padEnd(13)} ${"p50 ms".padStart(9)} ${"p99 ms".padStart(9)} ${"max ms".padStart(9)}  starter; p50 (max) of: commit → host's first statement, then → handler; statements`)
    for (const name of wakeSystems) {
      const key = name === "baton-pg" ? "pg" : "sqlite"
      const how = name === "baton-pg" ? "another process (LISTEN/NOTIFY)" : "the host's own process (hand-off)"
      try {
        const result = await runWake(name)
        const p50 = (values: ReadonlyArray<number>) => round(quantile(values, 0.5) ?? NaN, 1)
        wake.p50[key] = p50(result.total)
        wake.p99[key] = round(quantile(result.total, 0.99) ?? NaN, 1)
        say(
          `  ${name.padEnd(13)} ${cell(wake.p50[key], 9)} ${cell(wake.p99[key], 9)} ${cell(round(Math.max(...result.total), 1), 9)}  ${how}; ${p50(result.reaction)} (${
            round(Math.max(...result.reaction), 1)
          }) ms, ${p50(result.work)} (${round(Math.max(...result.work), 1)}) ms; ${p50(result.statements)}`
        )
      } catch (error) {
        failures++
        say(`  ${name.padEnd(13)} failed: ${error instanceof Error ? error.message : String(error)}`)
      }
    }
  }
  for (const system of Object.values(parents)) await system.close()
  await closePool()
  let list: ListPage.Figures = { listPageMs: { sqlite: null, pg: null }, listRawMs: { sqlite: null, pg: null } }
  if (listSystems.length > 0) {
    say(`\nControl.list page of 50 at ${listRuns.toLocaleString("en-US")} runs against the same keyset SELECT through the raw driver (as \`pnpm bench -- control-list\`):`)
    try {
      list = await Effect.runPromise(ListPage.both(
        { runs: listRuns, iterations: listIterations, say },
        { sqlite: listSystems.includes("baton-sqlite"), pgUrl: listSystems.includes("baton-pg") ? url : undefined }
      ))
    } catch (error) {
      failures++
      say(`  failed: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  if (asJson) {
    // The issue's shape: w2's Baton entries carry the write transactions per workflow; `w2` is the
    // 64-concurrent run, `w2seq` the sequential one.
    say(JSON.stringify({ ...out, wakeP50Ms: wake.p50, wakeP99Ms: wake.p99, ...list }))
  }
  return failures
}

main().then(
  (failures) => process.exit(failures === 0 ? 0 : 1),
  (error: unknown) => {
    process.stderr.write(`queue bench: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exit(1)
  }
)
