/**
 * Counts, at the driver, what an idle `NodeRuntime` host sends to its database: one host serving one
 * flow, no runs, for a few seconds after its startup sweep. Prints one JSON line with statements and
 * transactions per second (and PostgreSQL round trips). With `--by-text`, also the statements grouped
 * by their first 80 characters.
 *
 *   tsx --tsconfig tsconfig.base.json scripts/lib/count-idle-host.ts sqlite <file> [seconds] | pg <url> <schema> [seconds]
 */
import { Effect, Layer, ManagedRuntime, Schema } from "effect"
import * as Flow from "@baton/node/Flow"
import * as NodeRuntime from "@baton/node/NodeRuntime"
import * as Counter from "./StatementCounter.js"

const args = process.argv.slice(2).filter((a) => a !== "--by-text")
const byText = process.argv.includes("--by-text")
const [dialect, target] = args
const schema = dialect === "pg" ? args[2] : undefined
const seconds = Number(args[dialect === "pg" ? 3 : 2] ?? 5)
if (dialect === "sqlite") Counter.installSqlite()
else Counter.installPg()

const texts = new Map<string, number>()
if (byText) Counter.onStatement((text) => {
  const key = text.replace(/\s+/g, " ").trim().slice(0, 80)
  texts.set(key, (texts.get(key) ?? 0) + 1)
})

const idle = Flow.make({
  id: "idle.noop",
  description: "never started: the host only serves it",
  version: "1",
  input: Schema.Struct({}),
  handler: () => Effect.succeed(null)
})

const layer: Layer.Layer<NodeRuntime.Provided, unknown> = dialect === "sqlite"
  ? NodeRuntime.layer({ filename: target!, flows: [idle] })
  : NodeRuntime.layerPg({ url: target!, schema: schema!, flows: [idle] })
const runtime = ManagedRuntime.make(layer)
await runtime.runPromise(Effect.flatMap(NodeRuntime.NodeHost, (host) => host.sweepNow))
// Past the startup work (presence row, first sweeps), then count a steady window.
await new Promise((resolve) => setTimeout(resolve, 2000))
texts.clear()
const [, counts] = await Counter.around(() => new Promise((resolve) => setTimeout(resolve, seconds * 1000)))
await runtime.dispose()
const perS = (n: number) => Math.round((n / seconds) * 10) / 10
process.stdout.write(`${JSON.stringify({
  dialect,
  seconds,
  statementsPerS: perS(counts.statements),
  transactionsPerS: perS(counts.transactions),
  roundTripsPerS: perS(counts.roundTrips),
  ...(byText ? { byText: Object.fromEntries([...texts].sort((a, b) => b[1] - a[1])) } : {})
})}\n`)
