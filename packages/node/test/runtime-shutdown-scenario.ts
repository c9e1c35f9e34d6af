/**
 * SIGTERM to the owning worker mid-run (node.md check 16, and 29 on PostgreSQL), for
 * runtime-shutdown.test.ts (SQLite) and runtime-shutdown.pg.test.ts: the worker releases the run
 * (`baton.run.released { reason: "shutdown" }`, the in-flight attempt `interrupted` with its
 * checkpoint) and another worker, or the next start, finishes it.
 */
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect } from "@effect/vitest"
import { Effect, type ManagedRuntime } from "effect"
import type * as NodeRuntime from "../src/NodeRuntime.js"
import { bodyLines, waitFor, type Worker } from "./fixtures/runtimeProcesses.js"
import { launch } from "./fixtures/runtimeSupport.js"

/** Where the scenario runs: a client runtime on one database and how to start a worker process on it. */
export interface Backend {
  readonly client: ManagedRuntime.ManagedRuntime<NodeRuntime.Provided, NodeRuntime.BuildError>
  /** The workers' step-body log (`BATON_TEST_LOG`). */
  readonly log: string
  /** Starts a worker on the database; the test file stops it after all tests. */
  readonly start: (label: string) => Worker
}

/** Input of the `runtime-test.steps` flow: `count` steps `s0…`, each `stepMs` long in `chunks` checkpoints. */
export interface StepsInput {
  readonly count: number
  readonly stepMs: number
  readonly chunks: number
}

const queries = ({ client }: Backend) => ({
  getRun: (runId: string) => client.runPromise(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId))),
  attempts: (runId: string) => client.runPromise(Effect.flatMap(AttemptStore.AttemptStore, (s) => s.list(runId))),
  journal: (runId: string, eventTypes?: ReadonlyArray<string>) =>
    client.runPromise(Effect.flatMap(Journal.Journal, (j) =>
      j.entries({ runId: runId as never, limit: 1000, ...(eventTypes === undefined ? {} : { eventTypes }) }))),
  steps: async (runId: string) =>
    (await client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ step: string }>`SELECT step FROM runtime_test_rows WHERE run_id = ${runId}`))).map((r) => r.step).sort()
})

const completion = (getRun: ReturnType<typeof queries>["getRun"], runId: string) =>
  waitFor("completion", async () => {
    const s = await getRun(runId)
    return s.status === "completed" || s.status === "failed" ? s : undefined
  }, 60_000)

/** Two workers; the owner gets SIGTERM after the second step's checkpoint and the other worker finishes. */
export const releasedToTheOtherWorker = async (backend: Backend): Promise<void> => {
  const { client, log, start } = backend
  const { attempts, getRun, journal, steps } = queries(backend)
  const w1 = start("w1")
  const w2 = start("w2")
  await Promise.all([w1.ready, w2.ready])
  const runId = await client.runPromise(launch("runtime-test.steps", { count: 4, stepMs: 4000, chunks: 16 }))
  // Terminate while the second step's body runs, after it wrote a checkpoint.
  const ownerPid = await waitFor("the second step's checkpoint", async () => {
    const second = (await attempts(runId)).find((a) => (a.meta as { name: string }).name === "s1" && a.checkpoint !== undefined)
    if (second === undefined) return undefined
    const summary = await getRun(runId)
    return summary.ownerId === undefined ? undefined : (JSON.parse(summary.ownerId) as { pid: number }).pid
  }, 60_000)
  const victim = [w1, w2].find((w) => w.child.pid === ownerPid)!
  const survivor = victim === w1 ? w2 : w1
  victim.child.kill("SIGTERM")
  // Exit code 0: the graceful path finished before the watchdog (shutdownGrace + 2 s).
  expect(await victim.exited).toEqual({ code: 0, signal: null })
  const released = (await journal(runId)).entries.find((e) => e.eventType === "baton.run.released")
  expect(released?.payload).toMatchObject({ reason: "shutdown", drive: 1 })
  expect((await completion(getRun, runId)).status).toBe("completed")
  const s1 = (await attempts(runId)).filter((a) => (a.meta as { name: string }).name === "s1").sort((a, b) => a.attempt - b.attempt)
  // On failure, the step bodies and the victim's output say where the release went wrong.
  expect(s1.map((a) => a.state), JSON.stringify({ bodies: bodyLines(log), victim: victim.lines }))
    .toEqual(["interrupted", "completed"])
  expect(s1[0]?.checkpoint).toBeDefined()
  const bodies = bodyLines(log).filter((b) => b.step === "s1")
  expect(bodies.map((b) => b.pid)).toEqual([victim.child.pid, survivor.child.pid])
  expect(bodies[1]?.resumeFrom).toEqual(s1[0]?.checkpoint)
  expect(await steps(runId)).toEqual(["s0", "s1", "s2", "s3"])
  const driven = (await journal(runId, ["baton.run.driven"])).entries
  expect(driven.map((e) => (e.payload as { cause: string }).cause)).toEqual(["released", "released"])
}

/** One worker; SIGTERM during the first step leaves the run accepted and unowned until a new worker finishes it. */
export const releasedUntilRestart = async (backend: Backend, input: StepsInput): Promise<void> => {
  const { client, log, start } = backend
  const { getRun, steps } = queries(backend)
  const only = start("only")
  await only.ready
  const runId = await client.runPromise(launch("runtime-test.steps", input))
  await waitFor("the first step's body", async () => (bodyLines(log).length > 0 ? true : undefined), 60_000)
  only.child.kill("SIGTERM")
  expect(await only.exited).toEqual({ code: 0, signal: null })
  const released = await getRun(runId)
  expect(released.status).toBe("accepted")
  expect(released.ownerId).toBeUndefined()
  const again = start("again")
  expect((await completion(getRun, runId)).status).toBe("completed")
  expect(await steps(runId)).toEqual(Array.from({ length: input.count }, (_, i) => `s${i}`))
  again.child.kill("SIGTERM")
  expect(await again.exited).toEqual({ code: 0, signal: null })
}
