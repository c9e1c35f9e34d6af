/**
 * What one 3-step workflow costs when its host starts and awaits it (`Flow.start` + `Flow.await`, the
 * queue bench's W2 shape): statements, write transactions and PostgreSQL round trips per workflow,
 * counted at the driver, after one warm-up workflow. Prints one JSON line.
 *
 *   count-workflow.ts [--runs N] [--pg <url> --schema <schema>] [--trace]
 *
 * `--trace` prints the first counted workflow's statements, with a millisecond clock, before the line.
 */
import * as Flow from "@baton/node/Flow"
import * as NodeRuntime from "@baton/node/NodeRuntime"
import * as Step from "@baton/node/Step"
import { Effect, ManagedRuntime, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Counter from "./StatementCounter.js"

const args = process.argv.slice(2)
const arg = (name: string) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}
const runs = Number(arg("--runs") ?? 20)
const pg = arg("--pg")
const schema = arg("--schema") ?? `count_workflow_${process.pid}`
const trace = args.includes("--trace")

const flow = Flow.make({
  id: "count-three-steps",
  description: "three steps",
  version: "1",
  input: Schema.Struct({ i: Schema.Number }),
  handler: ({ i }) =>
    Effect.gen(function*() {
      const a = yield* Step.run("one", Effect.succeed(i + 1))
      const b = yield* Step.run("two", Effect.succeed(a * 2))
      return yield* Step.run("three", Effect.succeed(b - 1))
    })
})

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-count-workflow-"))
if (pg === undefined) Counter.installSqlite()
else Counter.installPg()
const runtime = ManagedRuntime.make(
  pg === undefined
    ? NodeRuntime.layer({ filename: path.join(dir, "count.db"), flows: [flow], maxRuns: 4 })
    : NodeRuntime.layerPg({ url: pg, schema, flows: [flow], maxRuns: 4 })
)
const one = (i: number) =>
  Effect.gen(function*() {
    const outcome = yield* Flow.await(yield* Flow.start(flow, { i }))
    if (outcome._tag !== "Completed") return yield* Effect.dieMessage(`workflow ${i} ended ${outcome._tag}`)
  })
try {
  await runtime.runPromise(one(-1))
  let tracing = trace
  Counter.onStatement((s) => {
    if (tracing) console.log(`${(performance.now() % 100_000).toFixed(1)} ${s.replace(/\s+/g, " ").slice(0, 160)}`)
  })
  await runtime.runPromise(one(0))
  tracing = false
  // The host's lease renewals (one statement per interval for all its runs) are not the workflow's.
  const renewals = Counter.matching(/^\s*UPDATE flows_runs (AS r )?SET heartbeat_at_ms = /i)
  const renewalsBefore = renewals()
  const before = Counter.snapshot()
  const cpu = process.cpuUsage()
  const t0 = performance.now()
  for (let i = 1; i <= runs; i++) await runtime.runPromise(one(i))
  const ms = performance.now() - t0
  const used = process.cpuUsage(cpu)
  const c = Counter.diff(before, Counter.snapshot())
  const heartbeats = renewals() - renewalsBefore
  console.log(JSON.stringify({
    dialect: pg === undefined ? "sqlite" : "pg",
    runs,
    statements: c.statements / runs,
    writeTransactions: (c.writeTransactions - heartbeats) / runs,
    heartbeatStatements: heartbeats,
    roundTrips: c.roundTrips / runs,
    msPerWorkflow: ms / runs,
    cpuMsPerWorkflow: (used.user + used.system) / 1000 / runs
  }))
} finally {
  await runtime.dispose()
  fs.rmSync(dir, { recursive: true, force: true })
}
