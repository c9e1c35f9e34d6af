/**
 * Baton in the queue bench: every Baton call the bench makes is in this module.
 *
 * - `enqueueMany(n)`: `n` runs of `bench-noop` started by `Flow.startMany` in batches of 1,000 (one
 *   transaction each) from a client-mode `NodeRuntime`; answers each run's id and the time its batch
 *   committed (when a host may take it).
 * - `runWorker`: a host-mode `NodeRuntime` serving `bench-noop` from `go` on (its catalog is empty
 *   until then, so runs launched during the enqueue wait), taking up to 16 runs at once, sweeping
 *   every 100 ms (the option's minimum) and once more each time a run settles.
 * - `startAndAwait`: W2 in one host process: `Flow.start` a `bench-three-steps` run (the host drives a
 *   run it starts itself at once when it has a free slot), then `Flow.await` its outcome.
 * - `countCompleted` / `drivenTwice`: completed runs, and runs driven more than once, the latter from
 *   the journal (`baton.run.driven` entries in `flows_journal_events`).
 * - `wakeHost` / `wakeStarter` / `startWhileIdle`: the wake measurement: an idle host with the defaults,
 *   runs started one at a time after idle gaps (by the host's own process, or a client in another), and
 *   each start's commit time as the driver sees it (`startCommits`).
 */
import * as Flow from "@baton/node/Flow"
import * as NodeRuntime from "@baton/node/NodeRuntime"
import * as Step from "@baton/node/Step"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Fiber, type Layer, ManagedRuntime, Queue, Schema, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Counter from "../../lib/StatementCounter.js"
import {
  cpuMsSince,
  freshSchema,
  nowMs,
  peakRssMb,
  perWorkerConcurrency,
  type Recorder,
  type System,
  type Target,
  type WorkerReport,
  type WorkerSide
} from "./common.js"
import { dropSchema } from "./pg.js"

const JobInput = Schema.Struct({ i: Schema.Number })

/** The no-op job: records its start and returns. */
export const noopFlow = (recorder?: Recorder) =>
  Flow.make({
    id: "bench-noop",
    description: "A no-op job of the queue bench",
    version: "1",
    input: JobInput,
    handler: ({ i }) => Effect.sync(() => recorder?.started(i)).pipe(Effect.as(null))
  })

/** The W2 workflow: three steps, each a durable completion. */
export const threeStepsFlow = (recorder?: Recorder) =>
  Flow.make({
    id: "bench-three-steps",
    description: "A three-step workflow of the queue bench",
    version: "1",
    input: JobInput,
    handler: ({ i }) =>
      Effect.gen(function*() {
        recorder?.started(i)
        const a = yield* Step.run("one", Effect.succeed(i + 1))
        const b = yield* Step.run("two", Effect.succeed(a * 2))
        return yield* Step.run("three", Effect.succeed(b - 1))
      })
  })

type Options = Omit<NodeRuntime.Options, "filename">

/** The runtime over the target: its SQLite file, or its PostgreSQL schema. */
export const layerFor = (target: Target, options: Options): Layer.Layer<NodeRuntime.Provided, NodeRuntime.BuildError> =>
  target.filename !== undefined
    ? NodeRuntime.layer({ ...options, filename: target.filename })
    : NodeRuntime.layerPg({ ...options, url: target.url, schema: target.schema })

/**
 * Enqueue `n` no-op jobs (inputs `{ i }`, i = 0..n-1) with `Flow.startMany`, 1,000 per transaction;
 * answers, by index, the run id and the time its batch committed.
 */
export const enqueueMany = (n: number) =>
  Effect.gen(function*() {
    const flow = noopFlow()
    const out: Array<{ readonly runId: string; readonly availableAtMs: number }> = []
    for (let from = 0; from < n; from += 1000) {
      const inputs = Array.from({ length: Math.min(1000, n - from) }, (_, k) => ({ i: from + k }))
      const handles = yield* Flow.startMany(flow, inputs)
      const at = nowMs()
      for (const handle of handles) out.push({ runId: handle.runId, availableAtMs: at })
    }
    return out
  })

/** Runs of the target whose status is `completed`. */
export const countCompleted = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM flows_runs WHERE status = 'completed'`.pipe(
    Effect.map((rows) => Number(rows[0]?.n ?? 0))
  ))

/** Runs driven more than once, from the journal. */
export const drivenTwice = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM (
    SELECT run_id FROM flows_journal_events WHERE event_type = 'baton.run.driven' GROUP BY run_id HAVING count(*) > 1
  ) AS twice`.pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0))))

/**
 * A host serving `flow`, gated: it serves nothing until `open()` (its catalog is empty until then),
 * and sweeps again whenever a run settles (one pending sweep at most), so a freed slot is filled
 * before the next poll.
 */
export const runWorker = (target: Target, flow: Flow.Any, options: { readonly maxRuns: number }) => {
  let serving = false
  const runtime = ManagedRuntime.make(layerFor(target, {
    loadFlows: () => Effect.succeed(serving ? [flow] : []),
    maxRuns: options.maxRuns,
    pollInterval: "100 millis"
  }))
  const sweepOnSettle = Effect.gen(function*() {
    const host = yield* NodeRuntime.NodeHost
    const wake = yield* Queue.sliding<void>(1)
    const events = yield* host.events.pipe(
      Stream.runForEach((event) => (event._tag === "settled" ? Queue.offer(wake, undefined) : Effect.void)),
      Effect.forkDaemon
    )
    const sweeps = yield* Queue.take(wake).pipe(Effect.zipRight(host.sweepNow), Effect.forever, Effect.forkDaemon)
    return [events, sweeps] as const
  })
  let fibers: ReadonlyArray<Fiber.RuntimeFiber<unknown, unknown>> = []
  return {
    ready: async () => {
      fibers = await runtime.runPromise(sweepOnSettle)
    },
    open: () => {
      serving = true
      return runtime.runPromise(Effect.flatMap(NodeRuntime.NodeHost, (host) => host.sweepNow))
    },
    close: async () => {
      await Effect.runPromise(Fiber.interruptAll(fibers))
      await runtime.dispose()
    }
  }
}

/** In a host: start one run of `flow` and await its outcome. */
export const startAndAwait = (flow: Flow.Flow<{ readonly i: number }, number, never>, input: { readonly i: number }) =>
  Effect.gen(function*() {
    const handle = yield* Flow.start(flow, input)
    const outcome = yield* Flow.await(handle)
    if (outcome._tag !== "Completed") return yield* Effect.dieMessage(`run ${handle.runId} ended ${outcome._tag}`)
  })

/**
 * The times (`nowMs`) at which this process sent a start transaction its `COMMIT` (a transaction that
 * inserted a `control_runs` row), seen at the driver. Sent, not acknowledged: a latency from it includes
 * the commit itself. Installs the driver counter of the dialect; call it before the runtime opens.
 */
export const startCommits = (dialect: "sqlite" | "pg") => {
  if (dialect === "sqlite") Counter.installSqlite()
  else Counter.installPg()
  const inserted = new WeakSet<object>()
  let last: number | undefined
  Counter.onStatement((text, connection) => {
    if (/^\s*INSERT INTO control_runs\s*\(/i.test(text)) inserted.add(connection)
    else if (/^\s*COMMIT\s*$/i.test(text) && inserted.has(connection)) {
      inserted.delete(connection)
      last = nowMs()
    }
  })
  return { last: () => last }
}

/** Sleep `ms` milliseconds. */
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** One start of the wake measurement: its run, and when its start's `COMMIT` was sent (NaN if unseen). */
export interface WakeStart {
  readonly runId: string
  readonly committedAtMs: number
}

/** Start one `bench-noop` run through `runtime` and await it. */
const startAndAwaitOne = (
  runtime: ManagedRuntime.ManagedRuntime<NodeRuntime.Provided, NodeRuntime.BuildError>,
  flow: ReturnType<typeof noopFlow>,
  commits: ReturnType<typeof startCommits>
) =>
(i: number): Promise<WakeStart> =>
  runtime.runPromise(Effect.gen(function*() {
    const handle = yield* Flow.start(flow, { i })
    const committedAtMs = commits.last() ?? NaN
    yield* Flow.await(handle)
    return { runId: handle.runId, committedAtMs }
  }))

/**
 * The wake measurement's host: a host-mode runtime serving `bench-noop` with the defaults (`maxRuns` 4,
 * `pollInterval` 1 s, so a run found by the poll alone waits up to a second). `ready` answers once the
 * host is built and a sweep tick has run; `start(i)` starts one run of it in this process and awaits its
 * outcome. `sentAt` answers when this process sent each of its statements (ms, in order), so a latency
 * splits at the host's first statement after the start's commit: its reaction, then the work to the body.
 */
export const wakeHost = (target: Target, recorder: Recorder) => {
  const commits = startCommits(target.filename !== undefined ? "sqlite" : "pg")
  const flow = noopFlow(recorder)
  const runtime = ManagedRuntime.make(layerFor(target, { flows: [flow] }))
  const sentAt: Array<number> = []
  Counter.onStatement(() => sentAt.push(nowMs()))
  return {
    ready: () => runtime.runPromise(Effect.flatMap(NodeRuntime.NodeHost, (host) => host.sweepNow)),
    start: startAndAwaitOne(runtime, flow, commits),
    sentAt: () => sentAt,
    close: () => runtime.dispose()
  }
}

/**
 * The wake measurement's starter in another process: a client-mode runtime that starts one `bench-noop`
 * run at a time and awaits it; `start(i)` answers its start's commit time.
 */
export const wakeStarter = (target: Target) => {
  const commits = startCommits(target.filename !== undefined ? "sqlite" : "pg")
  const flow = noopFlow()
  const runtime = ManagedRuntime.make(layerFor(target, { mode: "client", flows: [flow] }))
  return {
    start: startAndAwaitOne(runtime, flow, commits),
    close: () => runtime.dispose()
  }
}

/**
 * Idle, then start: `count` times, wait `gapMs` (±20 %) so the host has nothing to do, then `start(i)`;
 * answers each start by index. The first wait is at least 1.5 s, past the host's startup
 * ticks.
 */
export const startWhileIdle = async (count: number, gapMs: number, start: (i: number) => Promise<WakeStart>) => {
  const committedAt: Array<WakeStart> = new Array(count)
  await pause(1500)
  for (let i = 0; i < count; i++) {
    await pause(gapMs * (0.8 + 0.4 * Math.random()))
    committedAt[i] = await start(i)
  }
  return committedAt
}

const scratch: Array<string> = []

/** Baton on PostgreSQL (`sqlite: false`) or on a SQLite file, parent side. */
export const system = (sqlite: boolean): System => {
  let client: ManagedRuntime.ManagedRuntime<NodeRuntime.Provided, NodeRuntime.BuildError> | undefined
  const open = (target: Target) => {
    client ??= ManagedRuntime.make(layerFor(target, { mode: "client", flows: [noopFlow()] }))
    return client
  }
  return {
    prepare: async (url) => {
      if (!sqlite) return { url, schema: freshSchema("bench_baton") }
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-bench-queue-"))
      scratch.push(dir)
      return { url, schema: "", filename: path.join(dir, "bench.db") }
    },
    // The client runtime migrates the database before the first launch.
    enqueue: async (target, n) => {
      const launched = await open(target).runPromise(enqueueMany(n))
      return launched.map((job) => job.availableAtMs)
    },
    completed: (target) => open(target).runPromise(countCompleted),
    verify: (target) => open(target).runPromise(drivenTwice),
    drop: async (target) => {
      await client?.dispose()
      client = undefined
      if (target.filename !== undefined) fs.rmSync(path.dirname(target.filename), { recursive: true, force: true })
      else await dropSchema(target.url, target.schema)
    },
    close: async () => {
      for (const dir of scratch.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** The worker side: a gated host for W1/W3, a host that starts and awaits its own runs for W2. */
export const worker: WorkerSide = {
  open: async (target, recorder) => {
    // The parent's client runtime has migrated the database; this host only checks the ledger.
    const host = runWorker(target, noopFlow(recorder), { maxRuns: perWorkerConcurrency })
    await host.ready()
    return { begin: host.open, end: host.close }
  },
  workflows: async (target, recorder, options): Promise<WorkerReport> => {
    if (target.filename !== undefined) Counter.installSqlite()
    else Counter.installPg()
    const flow = threeStepsFlow(recorder)
    const runtime = ManagedRuntime.make(layerFor(target, { flows: [flow], maxRuns: Math.max(options.concurrency, 4), pollInterval: "100 millis" }))
    const availableAt: Array<number> = new Array(options.count)
    // Built before counting: the host's start (ledger check, presence row) is not the workflows'.
    await runtime.runPromise(Effect.void)
    // The host's lease renewals (one statement per interval for all its runs) are not either.
    const renewals = Counter.matching(/^\s*UPDATE flows_runs (AS r )?SET heartbeat_at_ms = /i)
    const before = Counter.snapshot()
    const cpu = process.cpuUsage()
    const t0Ms = nowMs()
    await runtime.runPromise(Effect.forEach(
      Array.from({ length: options.count }, (_, i) => i),
      (i) =>
        Effect.suspend(() => {
          availableAt[i] = nowMs()
          return startAndAwait(flow, { i })
        }),
      { concurrency: options.concurrency, discard: true }
    ))
    const t1Ms = nowMs()
    const cpuMs = cpuMsSince(cpu)
    const counts = Counter.diff(before, Counter.snapshot())
    await runtime.dispose()
    return {
      starts: recorder.starts,
      cpuMs,
      rssMb: peakRssMb(),
      t0Ms,
      t1Ms,
      availableAt,
      counts: {
        transactions: counts.transactions,
        writeTransactions: counts.writeTransactions - renewals(),
        statements: counts.statements
      }
    }
  }
}
