/**
 * Baton in the queue bench, through today's public API: every Baton call the bench makes is in this
 * module, so the start/await API can replace it in one place.
 *
 * - `enqueueMany(n)`: `n` runs of `bench-noop`, each planned, approved and launched through
 *   `Control` (three durable calls per job) from a client-mode `NodeRuntime`; answers each run's id
 *   and the time its launch returned (when a host may take it).
 * - `runWorker`: a host-mode `NodeRuntime` serving `bench-noop` from `go` on (its catalog is empty
 *   until then, so runs launched during the enqueue wait), taking up to 16 runs at once, sweeping
 *   every 100 ms (the option's minimum) and once more each time a run settles.
 * - `startAndAwait`: W2 in one host process: plan, approve and launch a `bench-three-steps` run (the
 *   host drives a run it launches itself at once when it has a free slot), then wait for its
 *   `settled` host event.
 * - `countCompleted` / `drivenTwice`: completed runs, and runs driven more than once, the latter from
 *   the journal (`baton.run.driven` entries in `flows_journal_events`).
 */
import * as Control from "@baton/control/Control"
import * as Flow from "@baton/node/Flow"
import * as NodeRuntime from "@baton/node/NodeRuntime"
import * as Step from "@baton/node/Step"
import * as SqlClient from "@effect/sql/SqlClient"
import { Deferred, Effect, Fiber, type Layer, ManagedRuntime, Queue, Schema, Stream } from "effect"
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

/** Plan, approve and launch one run of `flowId`; answers its id. */
const launch = (flowId: string, input: { readonly i: number }) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const card = yield* control.plan({ flowId, input })
    yield* control.approve(card.approval)
    const receipt = yield* control.run({
      _tag: "Plan",
      planId: card.planId,
      digest: card.digest,
      envelope: card.envelope,
      idempotencyKey: `launch:${card.planId}`
    })
    if (receipt._tag !== "Accepted" || receipt.runId === undefined) {
      return yield* Effect.dieMessage(`launch of ${flowId} answered ${receipt._tag}`)
    }
    return receipt.runId
  })

/**
 * Enqueue `n` no-op jobs (inputs `{ i }`, i = 0..n-1), 4 launches in flight; answers, by index,
 * the run id and the time its launch returned.
 */
export const enqueueMany = (n: number) =>
  Effect.forEach(
    Array.from({ length: n }, (_, i) => i),
    (i) => Effect.map(launch("bench-noop", { i }), (runId) => ({ runId, availableAtMs: nowMs() })),
    { concurrency: 4 }
  )

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

/**
 * In a host: launch one run of `flowId` and wait for its `settled` event, routed by the
 * subscription {@link settledEvents} made once per host.
 */
export const startAndAwait = (settled: Settled, flowId: string, input: { readonly i: number }) =>
  Effect.gen(function*() {
    const done = yield* Deferred.make<string>()
    const runId = yield* launch(flowId, input)
    // The host may have driven the run to its end inside `run`: its settle is then already parked.
    const early = yield* Effect.sync(() => {
      const reason = settled.early.get(runId)
      if (reason === undefined) settled.waiting.set(runId, done)
      else settled.early.delete(runId)
      return reason
    })
    const reason = early ?? (yield* Deferred.await(done))
    settled.waiting.delete(runId)
    if (reason !== "completed") return yield* Effect.dieMessage(`run ${runId} settled ${reason}`)
  })

/** Who waits for which run's settle, and settles nobody waited for yet. */
export interface Settled {
  readonly waiting: Map<string, Deferred.Deferred<string>>
  readonly early: Map<string, string>
}

/** Route the host's `settled` events to the runs `startAndAwait` waits for; answers the subscriber fiber. */
export const settledEvents = (settled: Settled) =>
  Effect.gen(function*() {
    const host = yield* NodeRuntime.NodeHost
    const subscribed = yield* Deferred.make<void>()
    const fiber = yield* Stream.runForEach(
      host.events.pipe(Stream.onStart(Deferred.succeed(subscribed, undefined))),
      (event) =>
        Effect.suspend(() => {
          if (event._tag !== "settled") return Effect.void
          const waiting = settled.waiting.get(event.runId)
          if (waiting !== undefined) return Deferred.succeed(waiting, event.reason)
          settled.early.set(event.runId, event.reason)
          return Effect.void
        })
    ).pipe(Effect.forkDaemon)
    // The stream has started; its subscription is in place long before the first launch's three
    // durable calls have returned, let alone its run settled.
    yield* Deferred.await(subscribed)
    return fiber
  })

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
    const settled: Settled = { waiting: new Map(), early: new Map() }
    const subscriber = await runtime.runPromise(settledEvents(settled))
    const availableAt: Array<number> = new Array(options.count)
    const before = Counter.snapshot()
    const cpu = process.cpuUsage()
    const t0Ms = nowMs()
    await runtime.runPromise(Effect.forEach(
      Array.from({ length: options.count }, (_, i) => i),
      (i) =>
        Effect.suspend(() => {
          availableAt[i] = nowMs()
          return startAndAwait(settled, "bench-three-steps", { i })
        }),
      { concurrency: options.concurrency, discard: true }
    ))
    const t1Ms = nowMs()
    const cpuMs = cpuMsSince(cpu)
    const counts = Counter.diff(before, Counter.snapshot())
    await Effect.runPromise(Fiber.interrupt(subscriber))
    await runtime.dispose()
    return {
      starts: recorder.starts,
      cpuMs,
      rssMb: peakRssMb(),
      t0Ms,
      t1Ms,
      availableAt,
      counts: { transactions: counts.transactions, writeTransactions: counts.writeTransactions, statements: counts.statements }
    }
  }
}
