/**
 * Counts what a no-op job costs a host that claims it (the W1 shape of the queue bench): a client
 * runtime starts N runs with `Flow.startMany`, a host runtime on the same SQLite file drives them,
 * and the host side's statements, write transactions and (PostgreSQL) round trips per job are printed:
 * `tsx --tsconfig tsconfig.base.json scripts/lib/count-queue-job.ts [--jobs N] [--trace] [--pg <url> --schema <schema>]`
 * (with `--pg`, both runtimes use that PostgreSQL schema instead of a SQLite file; drop it afterwards).
 */
import * as Flow from "@baton/node/Flow"
import * as NodeRuntime from "@baton/node/NodeRuntime"
import { Effect, ManagedRuntime, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Counter from "./StatementCounter.js"

const args = process.argv.slice(2)
const jobs = args.includes("--jobs") ? Number(args[args.indexOf("--jobs") + 1]) : 200
const trace = args.includes("--trace")
const pg = args.includes("--pg") ? args[args.indexOf("--pg") + 1] : undefined
const schema = args.includes("--schema") ? args[args.indexOf("--schema") + 1]! : `count_queue_job_${process.pid}`
let done = 0
const noop = Flow.make({
  id: "trace-noop",
  description: "no-op",
  version: "1",
  input: Schema.Struct({ i: Schema.Number }),
  handler: () => Effect.sync(() => void done++).pipe(Effect.as(null))
})
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-trace-q-"))
const filename = path.join(dir, "t.db")
if (pg === undefined) Counter.installSqlite()
else Counter.installPg()
const layerOf = (options: Omit<NodeRuntime.Options, "filename">) =>
  pg === undefined ? NodeRuntime.layer({ ...options, filename }) : NodeRuntime.layerPg({ ...options, url: pg, schema })
const client = ManagedRuntime.make(layerOf({ flows: [noop], mode: "client" }))
// The host's lease renewals are not the jobs'.
const renewals = Counter.matching(/^\s*UPDATE flows_runs (AS r )?SET heartbeat_at_ms = /i)
await client.runPromise(Flow.startMany(noop, Array.from({ length: jobs }, (_, i) => ({ i }))))
const lines: Array<string> = []
if (trace) Counter.onStatement((s) => lines.length < 400 && lines.push(`${(performance.now() % 100000).toFixed(1)} ${s.replace(/\s+/g, " ").slice(0, 130)}`))
const renewalsBefore = renewals()
const before = Counter.snapshot()
const cpu = process.cpuUsage()
const t0 = performance.now()
const host = ManagedRuntime.make(layerOf({ flows: [noop], maxRuns: 16, pollInterval: "100 millis" }))
await host.runPromise(Effect.void)
while (done < jobs) await new Promise((r) => setTimeout(r, 5))
const ms = performance.now() - t0
const c = Counter.diff(before, Counter.snapshot())
const used = process.cpuUsage(cpu)
await host.dispose()
await client.dispose()
if (trace) for (const l of lines) console.log(l)
console.log(JSON.stringify({
  dialect: pg === undefined ? "sqlite" : "pg",
  jobs,
  perJob: {
    statements: c.statements / jobs,
    writeTransactions: (c.writeTransactions - (renewals() - renewalsBefore)) / jobs,
    cpuMs: (used.user + used.system) / 1000 / jobs,
    ...(pg === undefined ? {} : { roundTrips: c.roundTrips / jobs })
  },
  jobsPerS: jobs / (ms / 1000)
}))
fs.rmSync(dir, { recursive: true, force: true })
