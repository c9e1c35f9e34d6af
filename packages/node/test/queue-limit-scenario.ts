/**
 * A global queue limit across real OS processes, over SQLite or PostgreSQL: three host processes
 * (fixtures/queue-worker.ts, `maxRuns` 4 each) drive released runs of a queue limited to `k`. This
 * process samples the queue's running count every few milliseconds while they work; afterwards the
 * bodies' log (one kernel clock for every process) and the attempt rows show how many bodies of the
 * queue ever overlapped. Runs of another queue keep the hosts' other slots busy.
 */
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Queues from "@baton/control/Queues"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect } from "@effect/vitest"
import { type Context, Effect, Layer } from "effect"
import type { ChildProcess } from "node:child_process"
import * as path from "node:path"
import { spawnFixture } from "../../database/test/support/processes.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { hold, peakOverlap, readLog } from "./fixtures/queueFlows.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"
import { launch } from "./fixtures/runtimeSupport.js"

/** Where the hosts run: a SQLite file, or a PostgreSQL schema. */
export type Target = { readonly filename: string } | { readonly url: string; readonly schema: string }

const clientLayer = (target: Target) =>
  "filename" in target
    ? NodeRuntime.layer({ filename: target.filename, flows: [hold], mode: "client", hostId: "queue-parent" })
    : NodeRuntime.layerPg({ url: target.url, schema: target.schema, flows: [hold], mode: "client", hostId: "queue-parent" })

/** Spawn a host worker; resolves once its first sweep is done. Killed when the scope closes. */
const startHost = (target: Target, env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.async<ChildProcess, Error>((resume) => {
      const child = spawnFixture(new URL("./fixtures/queue-worker.ts", import.meta.url), [
        "filename" in target ? target.filename : "unused"
      ], {
        env: {
          ...env,
          ...("url" in target ? { BATON_TEST_WORKER_PG_URL: target.url, BATON_TEST_WORKER_PG_SCHEMA: target.schema } : {})
        }
      })
      let out = ""
      let err = ""
      child.stderr?.on("data", (chunk) => (err += String(chunk)))
      child.stdout?.on("data", (chunk) => {
        out += String(chunk)
        if (out.includes("ready")) resume(Effect.succeed(child))
      })
      child.once("exit", (code) => resume(Effect.fail(new Error(`host exited ${code} before ready: ${err.slice(-2000)}`))))
    }),
    (child) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        const timer = setTimeout(() => child.kill("SIGKILL"), 6000)
        child.once("exit", () => {
          clearTimeout(timer)
          resume(Effect.void)
        })
        child.kill("SIGTERM")
      })
  )

const runningIn = (queue: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM control_runs cr JOIN flows_runs r ON r.run_id = cr.run_id
      WHERE cr.queue = ${queue} AND r.status = 'running'`).pipe(Effect.map((rows) => Number(rows[0]!.n)))

/** The attempt rows of `runIds` as start/end events (each host's clock). */
const attemptLines = (runIds: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ run_id: string; started_at_ms: number | string; finished_at_ms: number | string | null }>`
      SELECT run_id, started_at_ms, finished_at_ms FROM flows_attempts WHERE run_id IN ${sql.in(runIds as Array<string>)}`
  ).pipe(Effect.map((rows) =>
    rows.flatMap((r) => [
      { kind: "start" as const, runId: r.run_id, pid: 0, atMs: Number(r.started_at_ms) },
      { kind: "end" as const, runId: r.run_id, pid: 0, atMs: Number(r.finished_at_ms ?? Number.MAX_SAFE_INTEGER) }
    ])
  ))

/**
 * Three hosts, a queue limited to `k`: sampled running count and body overlap never above `k`, and the
 * limit is reached; every run of the queue completes once.
 */
export const globalLimitAcrossProcesses = (target: Target, k = 2) =>
  Effect.gen(function*() {
    const client: Context.Context<NodeRuntime.Provided> = yield* Layer.build(clientLayer(target))
    const inClient = <A, E>(effect: Effect.Effect<A, E, NodeRuntime.Provided>) => Effect.provide(effect, client)
    const queues = yield* inClient(Queues.Queues)
    yield* queues.setConcurrency("limited", k)
    // Both queues paused while the runs are made and the hosts start, so all three hosts are up and
    // polling when the work becomes claimable.
    yield* queues.pause("limited")
    yield* queues.pause("busy")
    const limited: Array<string> = []
    const others: Array<string> = []
    for (let i = 0; i < 30; i++) {
      const queue = i % 5 < 4 ? "limited" : "busy"
      // A limited body holds long enough that, even on a loaded machine, the next claim lands while
      // it runs, so the limit is reached and not merely respected.
      const runId = yield* inClient(launch("queue-test.hold", { ms: queue === "limited" ? 400 : 80 }))
      yield* inClient(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE control_runs SET queue = ${queue} WHERE run_id = ${runId}`))
      ;(queue === "limited" ? limited : others).push(runId)
    }
    const log = path.join(tempDb().dir, "queue.log")
    yield* Effect.all([0, 1, 2].map(() => startHost(target, { BATON_TEST_QUEUE_LOG: log, BATON_TEST_MAX_RUNS: "4" })), {
      concurrency: "unbounded"
    })
    yield* queues.resume("busy")
    yield* queues.resume("limited")
    let peakSampled = 0
    let samples = 0
    const deadline = Date.now() + 40_000
    for (;;) {
      const running = yield* inClient(runningIn("limited"))
      samples++
      peakSampled = Math.max(peakSampled, running)
      const done = (yield* queues.stats()).find((s) => s.queue === "limited")
      if (done !== undefined && done.available === 0 && done.running === 0) break
      if (Date.now() > deadline) return yield* Effect.dieMessage("the hosts did not finish the limited queue in 40 s")
      yield* Effect.sleep("3 millis")
    }
    const rt = yield* inClient(ControlRuntime.ControlRuntime)
    for (const runId of limited) expect((yield* rt.getRun(runId)).status).toBe("completed")
    const bodies = readLog(log).filter((l) => limited.includes(l.runId))
    const starts = new Map<string, number>()
    for (const l of bodies) if (l.kind === "start") starts.set(l.runId, (starts.get(l.runId) ?? 0) + 1)
    expect([...starts.values()]).toEqual(limited.map(() => 1))
    const fromAttempts = yield* inClient(attemptLines(limited))
    const hostsOfLimited = new Set(bodies.map((l) => l.pid)).size
    const figures = { samples, peakSampled, peakBodies: peakOverlap(bodies), peakAttempts: peakOverlap(fromAttempts), hostsOfLimited }
    console.log(`queue limit ${k} across 3 hosts: ${JSON.stringify(figures)}`)
    expect(figures.peakSampled).toBeLessThanOrEqual(k)
    expect(figures.peakBodies).toBeLessThanOrEqual(k)
    expect(figures.peakAttempts).toBeLessThanOrEqual(k)
    // The limit was used, not merely respected: k of the queue's bodies ran at once.
    expect(figures.peakBodies).toBe(k)
  })
