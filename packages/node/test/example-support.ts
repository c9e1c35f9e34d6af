/**
 * Test support for the main job: a generated directory, a database with a launched `index-dir` run,
 * worker processes, and the checks every indexer test makes.
 */
import * as Control from "@baton/control/Control"
import * as Companion from "@baton/journal/Companion"
import * as Journal from "@baton/journal/Journal"
import type * as JournalEvent from "@baton/journal/JournalEvent"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import type { ChildProcess } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { spawnFixture } from "../../database/test/support/processes.js"
import * as IndexDir from "../src/example/IndexDir.js"
import * as NodeRuntime from "../src/NodeRuntime.js"

/** Writes `count` files of varied sizes in nested directories; answers the root. */
export const makeTree = (count: number): string => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "baton-tree-"))
  for (let i = 0; i < count; i++) {
    const dir = path.join(root, `d${i % 17}`, `e${i % 5}`)
    fs.mkdirSync(dir, { recursive: true })
    // Sizes from a few bytes to ~20 kB, deterministic.
    const size = 16 + ((i * 7919) % 20_000)
    fs.writeFileSync(path.join(dir, `f${i}.txt`), Buffer.alloc(size, i % 251))
  }
  return root
}

/** Every regular file under `root` (relative `/` paths) with its SHA-256, walked independently. */
export const independentIndex = (root: string): Map<string, string> => {
  const out = new Map<string, string>()
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const absolute = path.join(entry.parentPath, entry.name)
    out.set(path.relative(root, absolute).split(path.sep).join("/"), createHash("sha256").update(fs.readFileSync(absolute)).digest("hex"))
  }
  return out
}

/** A client-mode runtime over `filename` with the example's catalog. */
export const clientRuntime = (filename: string) =>
  ManagedRuntime.make(Layer.orDie(NodeRuntime.layer({
    filename,
    mode: "client",
    flows: [IndexDir.flow],
    migrations: [IndexDir.migrations]
  })))

/** Plans, approves and launches `index-dir` over `root`; answers the run id. */
export const launch = (input: Record<string, unknown>) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const card = yield* control.plan({ flowId: IndexDir.flowId, input })
    yield* control.approve(card.approval)
    const receipt = yield* control.run({
      _tag: "Plan",
      planId: card.planId,
      digest: card.digest,
      envelope: card.envelope,
      idempotencyKey: `test:${card.planId}`
    })
    if (receipt._tag !== "Accepted" || receipt.runId === undefined) throw new Error(`launch: ${JSON.stringify(receipt)}`)
    return receipt.runId
  })

/** A worker process (src/example/worker.ts) and its `ready` pid. */
export interface WorkerProcess {
  readonly label: string
  readonly child: ChildProcess
  readonly ready: Promise<number>
  readonly exited: Promise<number | null>
  readonly output: () => string
}

const workerScript = fileURLToPath(new URL("../src/example/worker.ts", import.meta.url))

/** Spawns a worker; `trace` receives one line per hashed file. */
export const spawnWorker = (filename: string, label: string, trace: string): WorkerProcess =>
  spawnWorkerOf(workerScript, [filename, label], label, trace)

const pgWorkerScript = fileURLToPath(new URL("./fixtures/index-worker-pg.ts", import.meta.url))

/** Spawns a worker of the main job on a PostgreSQL schema (layerPg). */
export const spawnPgWorker = (url: string, schema: string, label: string, trace: string): WorkerProcess =>
  spawnWorkerOf(pgWorkerScript, [url, schema, label], label, trace)

/** A client-mode runtime on a PostgreSQL schema with the example's catalog. */
export const clientRuntimePg = (url: string, schema: string) =>
  ManagedRuntime.make(Layer.orDie(NodeRuntime.layerPg({
    url,
    schema,
    mode: "client",
    flows: [IndexDir.flow],
    migrations: [IndexDir.migrations]
  })))

const spawnWorkerOf = (script: string, args: ReadonlyArray<string>, label: string, trace: string): WorkerProcess => {
  const child = spawnFixture(script, args, { env: { BATON_INDEX_TRACE: trace } })
  let output = ""
  const ready = new Promise<number>((resolve, reject) => {
    child.stdout?.on("data", (chunk) => {
      output += String(chunk)
      const match = /^ready (.*)$/m.exec(output)
      if (match !== null) resolve((JSON.parse(match[1]!) as { pid: number }).pid)
    })
    child.stderr?.on("data", (chunk) => (output += String(chunk)))
    child.once("exit", (code) => reject(new Error(`${label} exited ${code} before ready: ${output}`)))
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { label, child, ready, exited, output: () => output }
}

/** Rows of the run in `index_dir_files`. */
export const rows = (runId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ path: string; sha256: string | null; status: string; batch: string; attempt: number }>`
      SELECT path, sha256, status, batch, attempt FROM index_dir_files WHERE run_id = ${runId}`)

/** Number of committed rows of the run. */
export const rowCount = (runId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ n: number }>`SELECT COUNT(*) AS n FROM index_dir_files WHERE run_id = ${runId}`.pipe(Effect.map((r) => Number(r[0]?.n ?? 0))))

/** Whether the run has a step attempt running (its row written, not yet finished). */
export const stepRunning = (runId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ n: number }>`SELECT COUNT(*) AS n FROM flows_attempts WHERE run_id = ${runId} AND state = 'running'`.pipe(
      Effect.map((r) => Number(r[0]?.n ?? 0) > 0)
    ))

/** The run's journal and its ownership companion stream. */
export const history = (runId: string) =>
  Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const own: Array<JournalEvent.Entry> = []
    let after: number | undefined
    for (;;) {
      const page = yield* journal.entries({ runId, limit: 1000, ...(after === undefined ? {} : { after }) })
      own.push(...page.entries)
      if (!page.hasMore) break
      after = page.entries[page.entries.length - 1]!.seq
    }
    const facts = yield* Companion.entries(Companion.runStore.stream, runId, { limit: 10_000 })
    return { own, facts: facts.entries }
  })

/** The owner pid of the run, when owned. */
export const ownerPid = (runId: string) =>
  Effect.flatMap(Control.Control, (control) => control.getRun(runId)).pipe(
    Effect.map((summary) => summary.ownerId === undefined ? undefined : (JSON.parse(summary.ownerId) as { pid: number }).pid)
  )

/** Waits until `effect` answers true, polling every `everyMs`, at most `timeoutMs`. */
export const until = <E, R>(effect: Effect.Effect<boolean, E, R>, timeoutMs: number, everyMs = 100) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (yield* effect) return
      if (Date.now() > deadline) return yield* Effect.die(new Error(`condition not met within ${timeoutMs} ms`))
      yield* Effect.sleep(everyMs)
    }
  })

/** Hashed-file counts from the trace: how many files were hashed more than once. */
export const rehashed = (trace: string): { readonly total: number; readonly repeated: number } => {
  const lines = fs.existsSync(trace) ? fs.readFileSync(trace, "utf8").split("\n").filter((l) => l.length > 0) : []
  const seen = new Map<string, number>()
  for (const line of lines) {
    const file = line.slice(line.indexOf(" ") + 1)
    seen.set(file, (seen.get(file) ?? 0) + 1)
  }
  return { total: lines.length, repeated: [...seen.values()].filter((n) => n > 1).length }
}
