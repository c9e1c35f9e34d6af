/**
 * Counts, at the driver, what one run lifecycle sends through the production stores (run store
 * with `SqlConsensus` leases and `SqlJournal` companion facts, as the run-store bench builds them):
 * statements, transactions and PostgreSQL round trips per `create`, `claimAndOwn`, `heartbeat`
 * and `transitionOwned(completed)`. Prints one JSON line. Used by `scripts/bench/run-store.ts`:
 *
 *   count-lifecycle.ts sqlite <file> | pg <url> <schema>
 */
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as Migrations from "@baton/run-store/Migrations"
import * as RunStore from "@baton/run-store/RunStore"
import { Clock, Effect, Layer, ManagedRuntime } from "effect"
import * as Counter from "./StatementCounter.js"

const [dialect, target, schema] = process.argv.slice(2)
if (dialect === "sqlite") Counter.installSqlite()
else Counter.installPg()

const database = dialect === "sqlite"
  ? SqliteDatabase.layer({ filename: target! })
  : PgDatabase.layer({ url: target!, schema: schema!, maxConnections: 1 })
const stack = Layer.provideMerge(
  Layer.mergeAll(RunStore.layerWith, SqlJournal.layerWith()),
  Layer.provideMerge(SqlConsensus.layer, Layer.provideMerge(DatabaseMigrations.layer([JournalMigrations.set, Migrations.set]), database))
)
const runtime = ManagedRuntime.make(stack)
const run = <A, E>(effect: Effect.Effect<A, E, RunStore.RunStore>) => runtime.runPromise(effect)

const owner = { hostId: "count", pid: process.pid, nonce: `n-${process.pid}` }
const pending = { status: "pending", owner: null, heartbeatAtMs: null } as const
const ops = ["create", "claimAndOwn", "heartbeat", "transitionOwned"] as const
type Op = typeof ops[number]
const samples: Record<Op, Array<Counter.Counts>> = { create: [], claimAndOwn: [], heartbeat: [], transitionOwned: [] }

const lifecycle = async (id: string, keep: boolean) => {
  const now = Math.floor(await run(Clock.currentTimeMillis))
  const step = async (op: Op, effect: Effect.Effect<{ readonly _tag: string } | void, unknown, RunStore.RunStore>, want?: string) => {
    const [outcome, counts] = await Counter.around(() => run(effect))
    if (want !== undefined && (outcome as { _tag: string })._tag !== want) throw new Error(`${op}: ${JSON.stringify(outcome)}`)
    if (keep) samples[op].push(counts)
  }
  await step("create", Effect.flatMap(RunStore.RunStore, (s) => s.create(id, '{"step":0}')))
  await step("claimAndOwn", Effect.flatMap(RunStore.RunStore, (s) => s.claimAndOwn(id, pending, owner, now)), "Activated")
  for (let i = 1; i <= 10; i++) {
    await step("heartbeat", Effect.flatMap(RunStore.RunStore, (s) => s.heartbeat(id, owner, now + i)), "Updated")
  }
  await step(
    "transitionOwned",
    Effect.flatMap(RunStore.RunStore, (s) => s.transitionOwned(id, owner, "completed", '{"step":1}')),
    "Transitioned"
  )
}

// Warm first (migrations, prepared-statement caches), then count.
for (let i = 0; i < 3; i++) await lifecycle(`count-warmup-${process.pid}-${i}`, false)
for (let i = 0; i < 20; i++) await lifecycle(`count-${process.pid}-${i}`, true)
await runtime.dispose()

// Each operation's counts should be the same every time; report the range if they are not.
const summary = (list: ReadonlyArray<Counter.Counts>) => {
  const field = (key: keyof Counter.Counts) => {
    const values = list.map((c) => c[key])
    const min = Math.min(...values)
    const max = Math.max(...values)
    return min === max ? min : `${min}-${max}`
  }
  return { statements: field("statements"), transactions: field("transactions"), roundTrips: field("roundTrips") }
}
process.stdout.write(
  JSON.stringify({ dialect, ...Object.fromEntries(ops.map((op) => [op, summary(samples[op])])) }) + "\n"
)
