/**
 * `pnpm bench -- run-store`: run lifecycles per second (create → claimAndOwn → 10 heartbeats →
 * transitionOwned completed, with leases and journal facts) against the raw-driver floor of the
 * same row writes, on SQLite and PostgreSQL; the short lifecycle (the three ownership moves alone)
 * against its row writes as autocommit statements, with the client CPU ratio; 4 processes on one
 * SQLite file versus one; and heartbeats and creates from 8 PostgreSQL connections on 8 runs versus
 * one connection, sampling the lock waits of the benchmark's own connections meanwhile (none
 * expected: writers of different runs share no row). Each measurement
 * runs in its own process (`packages/run-store/test/fixtures/bench-lifecycle.ts`).
 * Last, it counts at the driver the statements, transactions and PostgreSQL round trips of
 * each lifecycle operation (`scripts/lib/count-lifecycle.ts`), after the timed parts, and runs one
 * host owning 10,000 running runs on one heartbeat pulse for 12 s of real time on each dialect
 * (`scripts/lib/pulse-heartbeats.ts`): heartbeat statements per second, the process's CPU share of
 * one core, and the oldest lease stamp seen (`BATON_BENCH_PULSE_RUNS`, `BATON_BENCH_PULSE_SECONDS`;
 * `BATON_BENCH_ONLY=heartbeats` runs this part alone).
 * PostgreSQL runs when `BATON_BENCH_PG_URL` or `BATON_TEST_PG_URL` is set. With `--json` the
 * last line is one JSON object of the figures collected: `sqlite` and `pg` (the short lifecycle:
 * `roundTrips`, `transactions`, `lifecyclesPerS`, `rawFloorPerS`, client `cpuMs` and `rawCpuMs` per
 * lifecycle), `heartbeats` (`ownedRuns`, `statementsPerS`, `cpuShare`, PostgreSQL's when it ran,
 * else SQLite's; per dialect under `heartbeatsByDialect`), `sqlite4` (`ratio` of 4 processes to 1)
 * and `pg8` (`ratio` of 8 connections' heartbeats to 1, `createsRatio`, `sharedRowWaits`: lock-wait
 * samples of the 8-connection parts).
 */
import { execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const fixture = path.join(repoRoot, "packages/run-store/test/fixtures/bench-lifecycle.ts")
const env = { ...process.env, TSX_TSCONFIG_PATH: path.join(repoRoot, "tsconfig.base.json") }
const quiet = { ...process.env, PGOPTIONS: "--client-min-messages=warning" }
const pgUrl = process.env["BATON_BENCH_PG_URL"] ?? process.env["BATON_TEST_PG_URL"]

interface Result {
  readonly count: number
  readonly ms: number
  readonly cpuMs?: number
  readonly machineBusy?: number
}

const measure = (args: ReadonlyArray<string>, barrier?: { readonly ready: () => void; readonly go: Promise<void> }): Promise<Result> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", fixture, ...args], {
      cwd: repoRoot,
      env: barrier === undefined ? env : { ...env, BATON_BENCH_BARRIER: "1" }
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (c) => {
      out += String(c)
      if (barrier !== undefined && /^ready$/m.test(out) && !out.includes("{")) {
        out = out.replace(/^ready\n/m, "")
        barrier.ready()
        void barrier.go.then(() => child.stdin.end("go\n"))
      }
    })
    child.stderr.on("data", (c) => (err += String(c)))
    child.on("close", (code) => {
      const line = out.split("\n").find((l) => l.startsWith("{"))
      if (code !== 0 || line === undefined) return reject(new Error(`bench worker failed (${code}): ${err}`))
      resolve(JSON.parse(line))
    })
  })

/** Per-operation driver counts from `scripts/lib/count-lifecycle.ts`. */
interface OpCounts {
  readonly statements: number | string
  readonly transactions: number | string
  readonly roundTrips: number | string
}
type Counted = Record<"create" | "claimAndOwn" | "heartbeat" | "transitionOwned", OpCounts>
const counter = path.join(repoRoot, "scripts/lib/count-lifecycle.ts")
const count = (args: ReadonlyArray<string>): Counted => {
  const out = execFileSync(process.execPath, ["--import", "tsx", counter, ...args], {
    cwd: repoRoot,
    env: { ...env, PGOPTIONS: "--client-min-messages=warning" },
    encoding: "utf8"
  })
  return JSON.parse(out.split("\n").find((l) => l.startsWith("{"))!)
}
const counted: Array<[string, Counted]> = []

/**
 * Samples `pg_stat_activity` every 5 ms while `body` runs: how many samples saw one of the benchmark's
 * own connections (application name `bench:<schema>`) waiting on a lock, and on which kind.
 */
interface LockWaits {
  readonly samples: number
  readonly waiting: number
  readonly byEvent: Readonly<Record<string, number>>
}
const withLockSampling = async <A>(schema: string, body: () => Promise<A>): Promise<[A, LockWaits]> => {
  const pg = createRequire(path.join(repoRoot, "packages", "database", "package.json"))("pg")
  const client = new pg.Client({ connectionString: pgUrl })
  await client.connect()
  let samples = 0
  let waiting = 0
  const byEvent: Record<string, number> = {}
  let done = false
  const sampling = (async () => {
    while (!done) {
      const { rows } = await client.query(
        `SELECT wait_event FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
        [`bench:${schema}`]
      )
      samples++
      if (rows.length > 0) waiting++
      for (const r of rows) byEvent[r.wait_event] = (byEvent[r.wait_event] ?? 0) + 1
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  })()
  try {
    return [await body(), { samples, waiting, byEvent }]
  } finally {
    done = true
    await sampling
    await client.end()
  }
}
const lockText = (w: LockWaits) =>
  `lock waits in ${w.waiting} of ${w.samples} samples${
    Object.keys(w.byEvent).length === 0 ? "" : ` (${Object.entries(w.byEvent).map(([k, v]) => `${k} ${v}`).join(", ")})`
  }`

const rate = (r: Result) => (r.count * 1000) / r.ms
/** Client CPU per lifecycle of `stores` over that of `raw`, when both were measured. */
const cpuRatio = (stores: Result, raw: Result) =>
  stores.cpuMs === undefined || raw.cpuMs === undefined
    ? "?"
    : ((stores.cpuMs / stores.count) / (raw.cpuMs / raw.count)).toFixed(2)
/**
 * The ownership moves alone (create → claimAndOwn → transitionOwned, no heartbeats) against their
 * row writes as autocommit statements through the raw driver: rate ratio and client CPU ratio.
 */
const short = async (label: string, target: ReadonlyArray<string>, lifecycles: number) => {
  const stores = await measure([...target, "lifecycle3", String(lifecycles), "short"])
  const rawShort = await measure([...target, "raw3", String(lifecycles), "short-raw"])
  row(
    `${label} short lifecycles create → claimAndOwn → transitionOwned (stores)`,
    rate(stores),
    `ratio to raw floor ${(rate(stores) / rate(rawShort)).toFixed(3)}; client CPU ${cpuRatio(stores, rawShort)}× raw`
  )
  row(`${label} short lifecycles, raw floor (autocommit statements)`, rate(rawShort), "1")
  return { stores, raw: rawShort }
}
/** A dialect's entry of the `--json` line: the short lifecycle against its raw floor, and its counts. */
const lifecycleFigures = (measured: { readonly stores: Result; readonly raw: Result }, counts: Counted) => {
  const total = (key: keyof OpCounts) =>
    [counts.create, counts.claimAndOwn, counts.transitionOwned].reduce((n, o) => n + Number(o[key]), 0)
  const perLifecycle = (r: Result) => r.cpuMs === undefined ? null : Number((r.cpuMs / r.count).toFixed(3))
  return {
    roundTrips: total("roundTrips"),
    transactions: total("transactions"),
    lifecyclesPerS: Number(rate(measured.stores).toFixed(1)),
    rawFloorPerS: Number(rate(measured.raw).toFixed(1)),
    cpuMs: perLifecycle(measured.stores),
    rawCpuMs: perLifecycle(measured.raw)
  }
}
const fmt = (n: number) => n.toFixed(n < 10 ? 2 : 1)
const rows: Array<[string, string, string]> = []
const row = (what: string, value: number, ratio: string) => {
  rows.push([what, fmt(value), ratio])
  process.stdout.write(`${what}: ${fmt(value)}/s ${ratio}\n`)
}

const LIFECYCLES = Number(process.env["BATON_BENCH_LIFECYCLES"] ?? 60)
/** SQLite lifecycles per process: a SQLite lifecycle takes only milliseconds, and short runs swing. */
const SQLITE_LIFECYCLES = Number(process.env["BATON_BENCH_SQLITE_LIFECYCLES"] ?? 300)
/** Timed heartbeats per measurement (spread over the runs), enough for a steady rate. */
const HEARTBEATS = Number(process.env["BATON_BENCH_HEARTBEATS"] ?? 4000)
/** Timed creates per measurement (spread over the connections). */
const CREATES = Number(process.env["BATON_BENCH_CREATES"] ?? 2000)

/** The figures the final `--json` line reports. */
const figures: Record<string, unknown> = {}

interface PulseResult {
  readonly dialect: string
  readonly ownedRuns: number
  readonly windowMs: number
  readonly statementsPerS: number
  readonly transactionsPerS: number
  readonly roundTripsPerS?: number
  readonly cpuShare: number
  readonly maxAgeMs: number
  readonly staleAfterMs: number
  readonly fresh: boolean
  readonly ended: number
}
const PULSE_RUNS = Number(process.env["BATON_BENCH_PULSE_RUNS"] ?? 10_000)
const PULSE_SECONDS = Number(process.env["BATON_BENCH_PULSE_SECONDS"] ?? 12)
const pulseScript = path.join(repoRoot, "scripts/lib/pulse-heartbeats.ts")
const pulse = (target: ReadonlyArray<string>): PulseResult => {
  const out = execFileSync(process.execPath, ["--import", "tsx", pulseScript, ...target, String(PULSE_RUNS), String(PULSE_SECONDS)], {
    cwd: repoRoot,
    env: { ...env, PGOPTIONS: "--client-min-messages=warning" },
    encoding: "utf8"
  })
  return JSON.parse(out.split("\n").find((l) => l.startsWith("{"))!)
}
/**
 * One host owning `PULSE_RUNS` running runs renewed by one heartbeat pulse, on SQLite and (when
 * configured) PostgreSQL: heartbeat statements per second (goal ≤ 11 for 10,000 runs), the
 * process's CPU share of one core (goal < 5 %), and whether every lease stayed fresh.
 */
const pulseHeartbeats = () => {
  const byDialect: Record<string, Omit<PulseResult, "dialect">> = {}
  const report = (label: string, r: PulseResult) => {
    const { dialect, ...rest } = r
    byDialect[dialect] = rest
    row(
      `${label} heartbeat statements, one host owning ${r.ownedRuns} runs on one pulse`,
      r.statementsPerS,
      `CPU ${(r.cpuShare * 100).toFixed(1)}% of one core; oldest stamp ${r.maxAgeMs} ms (stale after ${r.staleAfterMs} ms)${
        r.roundTripsPerS === undefined ? "" : `; ${fmt(r.roundTripsPerS)} round trips/s with the sampler's`
      }; ${r.fresh ? "every lease fresh" : `NOT FRESH (${r.ended} loops ended)`}`
    )
  }
  const pulseDir = fs.mkdtempSync(path.join(os.tmpdir(), "run-store-pulse-"))
  try {
    report("SQLite", pulse(["sqlite", path.join(pulseDir, "pulse.db")]))
  } finally {
    fs.rmSync(pulseDir, { recursive: true, force: true })
  }
  if (pgUrl !== undefined) {
    const pulseSchema = `bench_${randomBytes(8).toString("hex")}`
    execFileSync("psql", [pgUrl, "-qc", `CREATE SCHEMA ${pulseSchema}`], { env: quiet })
    try {
      report("PostgreSQL", pulse(["pg", pgUrl, pulseSchema]))
    } finally {
      execFileSync("psql", [pgUrl, "-qc", `DROP SCHEMA ${pulseSchema} CASCADE`], { env: quiet })
    }
  }
  const main = byDialect["pg"] ?? byDialect["sqlite"]!
  figures["heartbeats"] = { ownedRuns: main.ownedRuns, statementsPerS: main.statementsPerS, cpuShare: main.cpuShare }
  figures["heartbeatsByDialect"] = byDialect
}
const printJson = () => {
  if (process.argv.includes("--json")) process.stdout.write(JSON.stringify(figures) + "\n")
}

if (process.env["BATON_BENCH_ONLY"] === "heartbeats") {
  pulseHeartbeats()
  printJson()
  process.exit(0)
}

// SQLite: one process through the stores versus the raw floor, then 4 processes.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "run-store-bench-"))
const file = path.join(dir, "runs.db")
await measure(["sqlite", file, "lifecycle", "1", "warmup"])
const one = await measure(["sqlite", file, "lifecycle", String(SQLITE_LIFECYCLES), "one"])
const raw = await measure(["sqlite", file, "raw", String(SQLITE_LIFECYCLES * 4), "raw"])
row("SQLite lifecycles, 1 process (stores)", rate(one), `ratio to raw floor ${(rate(one) / rate(raw)).toFixed(3)}`)
row("SQLite lifecycles, raw better-sqlite3 floor", rate(raw), "1")
// The four start timing together: each warms up, says ready, and waits for the others.
let readyCount = 0
let go!: () => void
const started = new Promise<void>((resolve) => (go = resolve))
const barrier = { ready: () => ++readyCount === 4 && go(), go: started }
const four = await Promise.all(
  [0, 1, 2, 3].map((i) => measure(["sqlite", file, "lifecycle", String(SQLITE_LIFECYCLES), `four-${i}`], barrier))
)
const aggregate = (four.reduce((n, r) => n + r.count, 0) * 1000) / Math.max(...four.map((r) => r.ms))
row("SQLite lifecycles, 4 processes aggregate", aggregate, `ratio to 1 process ${(aggregate / rate(one)).toFixed(2)}`)
const sqliteShort = await short("SQLite", ["sqlite", path.join(dir, "short.db")], SQLITE_LIFECYCLES)
const sqliteCounts = count(["sqlite", path.join(dir, "count.db")])
counted.push(["SQLite", sqliteCounts])
figures["sqlite"] = lifecycleFigures(sqliteShort, sqliteCounts)
figures["sqlite4"] = { ratio: Number((aggregate / rate(one)).toFixed(3)) }
fs.rmSync(dir, { recursive: true, force: true })

if (pgUrl !== undefined) {
  const schema = `bench_${randomBytes(8).toString("hex")}`
  execFileSync("psql", [pgUrl, "-qc", `CREATE SCHEMA ${schema}`], { env: quiet })
  try {
    const target = ["pg", pgUrl, schema]
    await measure([...target, "lifecycle", "1", "warmup"])
    const pgOne = await measure([...target, "lifecycle", String(LIFECYCLES), "one"])
    const pgRaw = await measure([...target, "raw", String(LIFECYCLES), "raw"])
    row("PostgreSQL lifecycles (stores)", rate(pgOne), `ratio to raw floor ${(rate(pgOne) / rate(pgRaw)).toFixed(3)}`)
    row("PostgreSQL lifecycles, raw node-postgres floor", rate(pgRaw), "1")
    // The protocol floor: the stores' own transactions sent raw, no library code (see the fixture).
    const pgProtocol = await measure([...target, "protocol", String(LIFECYCLES), "protocol"])
    row(
      "PostgreSQL lifecycles, the stores' transactions through raw node-postgres (protocol floor)",
      rate(pgProtocol),
      `ratio to raw floor ${(rate(pgProtocol) / rate(pgRaw)).toFixed(3)}; stores reach ${
        (rate(pgOne) / rate(pgProtocol)).toFixed(2)
      } of it`
    )
    const pgShort = await short("PostgreSQL", target, LIFECYCLES * 4)
    const [hb1, hb1Waits] = await withLockSampling(schema, () => measure([...target, "heartbeats", String(HEARTBEATS), "1"]))
    const [hb8, hb8Waits] = await withLockSampling(schema, () => measure([...target, "heartbeats", String(HEARTBEATS), "8"]))
    row("PostgreSQL heartbeats, 1 connection, 1 run", rate(hb1), `1; ${lockText(hb1Waits)}`)
    row(
      "PostgreSQL heartbeats, 8 connections, 8 runs",
      rate(hb8),
      `ratio to 1 connection ${(rate(hb8) / rate(hb1)).toFixed(2)}; ${lockText(hb8Waits)}`
    )
    // Creates take a row_seq and a revision: the numbers that once came from shared singleton rows.
    const [cr1, cr1Waits] = await withLockSampling(schema, () => measure([...target, "creates", String(CREATES), "1"]))
    const [cr8, cr8Waits] = await withLockSampling(schema, () => measure([...target, "creates", String(CREATES), "8"]))
    row("PostgreSQL creates, 1 connection", rate(cr1), `1; ${lockText(cr1Waits)}`)
    row(
      "PostgreSQL creates, 8 connections",
      rate(cr8),
      `ratio to 1 connection ${(rate(cr8) / rate(cr1)).toFixed(2)}; ${lockText(cr8Waits)}`
    )
    const ehb1 = await measure([...target, "effect-sql-heartbeats", String(HEARTBEATS), "1"])
    row(
      "PostgreSQL heartbeats, same statement through the Effect SQL client alone, 1 connection",
      rate(ehb1),
      `ratio to the stores ${(rate(ehb1) / rate(hb1)).toFixed(2)}`
    )
    const phb1 = await measure([...target, "protocol-heartbeats", String(HEARTBEATS), "1"])
    const phb8 = await measure([...target, "protocol-heartbeats", String(HEARTBEATS), "8"])
    row("PostgreSQL heartbeats, protocol floor, 1 connection", rate(phb1), `ratio to the stores ${(rate(phb1) / rate(hb1)).toFixed(2)}`)
    row(
      "PostgreSQL heartbeats, protocol floor, 8 connections",
      rate(phb8),
      `ratio to 1 connection ${(rate(phb8) / rate(phb1)).toFixed(2)}`
    )
    // One Node process runs on one core: with 8 connections it can at best spend all of its
    // time on client work, so the gain over one connection is capped by latency ÷ client CPU.
    const perBeat = (r: Result) => r.cpuMs === undefined ? "?" : (r.cpuMs / r.count).toFixed(2)
    process.stdout.write(
      `(client CPU per heartbeat, 1 connection: stores ${perBeat(hb1)} ms, Effect SQL alone ${perBeat(ehb1)} ms, ` +
        `raw node-postgres ${perBeat(phb1)} ms)\n`
    )
    if (hb1.cpuMs !== undefined && hb8.cpuMs !== undefined) {
      process.stdout.write(
        `(client CPU per heartbeat: ${(hb1.cpuMs / hb1.count).toFixed(2)} ms with 1 connection, ` +
          `${(hb8.cpuMs / hb8.count).toFixed(2)} ms with 8; latency per heartbeat with 1 connection ` +
          `${(hb1.ms / hb1.count).toFixed(2)} ms; one-core ceiling of the 8-connection gain ≈ ` +
          `${(hb1.ms / hb8.cpuMs * hb8.count / hb1.count).toFixed(2)}×)\n`
      )
    }
    // The database server shares the machine: when every core is busy, more connections cannot help.
    if (hb1.machineBusy !== undefined && hb8.machineBusy !== undefined) {
      process.stdout.write(
        `(machine CPU busy over the timed part: ${(hb1.machineBusy * 100).toFixed(0)}% of ${os.cpus().length} cores ` +
          `with 1 connection, ${(hb8.machineBusy * 100).toFixed(0)}% with 8)\n`
      )
    }
    const pgCounts = count(target)
    counted.push(["PostgreSQL", pgCounts])
    figures["pg"] = lifecycleFigures(pgShort, pgCounts)
    figures["pg8"] = {
      ratio: Number((rate(hb8) / rate(hb1)).toFixed(3)),
      createsRatio: Number((rate(cr8) / rate(cr1)).toFixed(3)),
      sharedRowWaits: hb8Waits.waiting + cr8Waits.waiting
    }
  } finally {
    execFileSync("psql", [pgUrl, "-qc", `DROP SCHEMA ${schema} CASCADE`], { env: quiet })
  }
} else {
  process.stdout.write("PostgreSQL skipped: set BATON_BENCH_PG_URL or BATON_TEST_PG_URL\n")
}

pulseHeartbeats()

process.stdout.write("\n| Measurement | per second | ratio |\n| --- | ---: | ---: |\n")
for (const [what, value, ratio] of rows) process.stdout.write(`| ${what} | ${value} | ${ratio} |\n`)

// Driver counts per operation: statements (transaction control included), BEGINs, and on
// PostgreSQL round trips (a simple-query script such as the opening BEGIN … is one trip).
const sum = (c: Counted, key: keyof OpCounts) =>
  [c.create, c.claimAndOwn, c.transitionOwned].every((o) => typeof o[key] === "number")
    ? String([c.create, c.claimAndOwn, c.transitionOwned].reduce((n, o) => n + (o[key] as number), 0))
    : "varies"
process.stdout.write(
  "\n| Dialect | Operation | statements | transactions | round trips |\n| --- | --- | ---: | ---: | ---: |\n"
)
for (const [dialect, c] of counted) {
  const trips = (o: OpCounts) => dialect === "SQLite" ? "-" : String(o.roundTrips)
  for (const op of ["create", "claimAndOwn", "transitionOwned", "heartbeat"] as const) {
    const o = c[op]
    process.stdout.write(`| ${dialect} | ${op} | ${o.statements} | ${o.transactions} | ${trips(o)} |\n`)
  }
  process.stdout.write(
    `| ${dialect} | lifecycle create → claimAndOwn → transitionOwned | ${sum(c, "statements")} | ` +
      `${sum(c, "transactions")} | ${dialect === "SQLite" ? "-" : sum(c, "roundTrips")} |\n`
  )
}

printJson()
