/**
 * Control facade benchmark (issue 5): plan → approve → launch → complete per second, through
 * `Control` over `SqlControlRuntime` with `ControlExecutor.FiberHost` driving a body that returns at
 * once. Each lifecycle is sequential and durable: a plan (card, key, token, journal entry), an
 * approval (decision, grant-free, receipt, journal entry), a launch (run row, launch index, claim,
 * run key, receipt, journal entries), the hand-off and the body's completion write.
 *
 * SQLite file always; PostgreSQL when BATON_TEST_PG_URL is set.
 * Usage: `pnpm bench control-facade` (env BATON_BENCH_LIFECYCLES, default 200).
 */
import * as Control from "@baton/control/Control"
import * as ControlExecutor from "@baton/control/ControlExecutor"
import * as ControlMigrations from "@baton/control/Migrations"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as SqlControlRuntime from "@baton/control/SqlControlRuntime"
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as RunStoreMigrations from "@baton/run-store/Migrations"
import * as RunStore from "@baton/run-store/RunStore"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"

const lifecycles = Number(process.env["BATON_BENCH_LIFECYCLES"] ?? "200")
const warmup = Math.max(5, Math.floor(lifecycles / 10))

const flow: ControlRuntime.DurableFlow = {
  flowId: "bench",
  description: "returns at once",
  deployClass: false,
  envelope: { capabilities: [], flows: [], budget: {} },
  executionDigest: "bench-1"
}

const stack = <E>(database: Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, E>) => {
  const migrated = Layer.provideMerge(
    Layer.orDie(DatabaseMigrations.layer([JournalMigrations.set, RunStoreMigrations.set, ControlMigrations.set])),
    Layer.orDie(database)
  )
  const consensus = Layer.provideMerge(SqlConsensus.layer, migrated)
  const stores = Layer.provideMerge(Layer.mergeAll(Layer.orDie(SqlJournal.layerWith()), RunStore.layerWith), consensus)
  const runtime = Layer.provideMerge(Layer.orDie(SqlControlRuntime.layer({ flows: [flow] })), stores)
  const executor = Layer.provideMerge(
    Layer.scoped(ControlExecutor.ControlExecutor, ControlExecutor.FiberHost.make({ flows: { bench: () => Effect.succeed(null) } })),
    runtime
  )
  return Layer.provideMerge(Control.layer, executor)
}

const lifecycle = (i: number) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const card = yield* control.plan({ flowId: "bench", input: { i }, idempotencyKey: `plan-${i}` })
    yield* control.approve({ ...card.approval, idempotencyKey: `approve-${i}` })
    const receipt = yield* control.run({
      _tag: "Plan",
      planId: card.planId,
      digest: card.digest,
      envelope: card.envelope,
      idempotencyKey: `run-${i}`
    })
    if (receipt._tag !== "Accepted" || receipt.runId === undefined) return yield* Effect.dieMessage(`launch answered ${receipt._tag}`)
    const runId = receipt.runId
    // The body completes on its own fiber; wait for its settling write.
    for (;;) {
      const summary = yield* control.getRun(runId)
      if (summary.status === "completed") return
      if (summary.status === "failed" || summary.status === "cancelled") return yield* Effect.dieMessage(summary.status)
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
  })

const measure = Effect.gen(function*() {
  for (let i = 0; i < warmup; i++) yield* lifecycle(-1 - i)
  const t0 = performance.now()
  for (let i = 0; i < lifecycles; i++) yield* lifecycle(i)
  const ms = performance.now() - t0
  return { perSecond: Math.round((lifecycles / ms) * 1000 * 10) / 10, msEach: ms / lifecycles }
})

const report = (dialect: string, result: { perSecond: number; msEach: number }) =>
  process.stdout.write(
    `  ${dialect.padEnd(12)} ${String(result.perSecond).padStart(8)} lifecycles/s  (${result.msEach.toFixed(1)} ms each, ${lifecycles} sequential)\n`
  )

const main = Effect.gen(function*() {
  process.stdout.write("plan → approve → launch → complete (Control + SqlControlRuntime + FiberHost):\n")
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-bench-control-facade-"))
  const sqlite = yield* measure.pipe(
    Effect.provide(stack(SqliteDatabase.layer({ filename: path.join(dir, "bench.db") }))),
    Effect.scoped
  )
  report("SQLite file", sqlite)
  fs.rmSync(dir, { recursive: true, force: true })
  const url = process.env["BATON_TEST_PG_URL"]
  if (url === undefined || url === "") {
    process.stdout.write("  PostgreSQL skipped (BATON_TEST_PG_URL is unset)\n")
    return
  }
  const pg = yield* measure.pipe(Effect.provide(stack(TestDatabase.layerPostgres(url))), Effect.scoped)
  report("PostgreSQL", pg)
  process.stdout.write(`${JSON.stringify({ bench: "control-facade", lifecycles, sqlite, pg })}\n`)
})

Effect.runPromise(main).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
