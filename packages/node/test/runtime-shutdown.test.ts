/**
 * SIGTERM to the owning worker mid-run (node.md check 16): the worker releases the run within
 * its shutdown bound (`baton.run.released { reason: "shutdown" }`, the in-flight attempt
 * `interrupted` with its checkpoint) and another worker, or the next start, finishes it.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, ManagedRuntime } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { appSet, flows } from "./fixtures/runtimeFlows.js"
import { bodyLines, startWorker, stopAll, tempDb, waitFor, type Worker } from "./fixtures/runtimeProcesses.js"
import { launch } from "./fixtures/runtimeSupport.js"

const workers: Array<Worker> = []
afterAll(() => stopAll(workers))

const setup = () => {
  const db = tempDb()
  const client = ManagedRuntime.make(
    NodeRuntime.layer({ filename: db.filename, mode: "client", flows, migrations: [appSet] })
  )
  const getRun = (runId: string) =>
    client.runPromise(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
  const rows = (runId: string) =>
    client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ step: string }>`SELECT step FROM runtime_test_rows WHERE run_id = ${runId}`))
  return { db, client, getRun, rows }
}

const input = { count: 4, stepMs: 4000, chunks: 16 }

describe.concurrent("runtime: SIGTERM of the owner", () => {
  it("the run is released and the other worker finishes it", async () => {
    const { client, db, getRun, rows } = setup()
    const env = { BATON_TEST_LOG: db.log }
    const w1 = startWorker(db.filename, "w1", env)
    const w2 = startWorker(db.filename, "w2", env)
    workers.push(w1, w2)
    await Promise.all([w1.ready, w2.ready])
    const runId = await client.runPromise(launch("runtime-test.steps", input))
    // Terminate while the second step's body runs, after it wrote a checkpoint.
    const ownerPid = await waitFor("the second step's checkpoint", async () => {
      const attempts = await client.runPromise(Effect.flatMap(AttemptStore.AttemptStore, (s) => s.list(runId)))
      const second = attempts.find((a) => (a.meta as { name: string }).name === "s1" && a.checkpoint !== undefined)
      if (second === undefined) return undefined
      const summary = await getRun(runId)
      return summary.ownerId === undefined ? undefined : (JSON.parse(summary.ownerId) as { pid: number }).pid
    }, 60_000)
    const victim = [w1, w2].find((w) => w.child.pid === ownerPid)!
    const survivor = victim === w1 ? w2 : w1
    victim.child.kill("SIGTERM")
    // Exit code 0: the graceful path finished before the watchdog (shutdownGrace + 2 s).
    expect(await victim.exited).toEqual({ code: 0, signal: null })
    const journal = await client.runPromise(Effect.flatMap(Journal.Journal, (j) =>
      j.entries({ runId: runId as never, limit: 1000 })))
    const released = journal.entries.find((e) => e.eventType === "baton.run.released")
    expect(released?.payload).toMatchObject({ reason: "shutdown", drive: 1 })
    const summary = await waitFor("completion", async () => {
      const s = await getRun(runId)
      return s.status === "completed" || s.status === "failed" ? s : undefined
    }, 60_000)
    expect(summary.status).toBe("completed")
    const attempts = await client.runPromise(Effect.flatMap(AttemptStore.AttemptStore, (s) => s.list(runId)))
    const s1 = attempts.filter((a) => (a.meta as { name: string }).name === "s1").sort((a, b) => a.attempt - b.attempt)
    if (s1.length !== 2) console.log(JSON.stringify({ s1, bodies: bodyLines(db.log), victim: victim.lines, journal: journal.entries.map((e) => [e.eventType, e.payload]) }, null, 1))
    expect(s1.map((a) => a.state)).toEqual(["interrupted", "completed"])
    const bodies = bodyLines(db.log).filter((b) => b.step === "s1")
    expect(bodies.map((b) => b.pid)).toEqual([victim.child.pid, survivor.child.pid])
    expect(bodies[1]?.resumeFrom).toEqual(s1[0]?.checkpoint)
    expect((await rows(runId)).map((r) => r.step).sort()).toEqual(["s0", "s1", "s2", "s3"])
    const driven = (await client.runPromise(Effect.flatMap(Journal.Journal, (j) =>
      j.entries({ runId: runId as never, eventTypes: ["baton.run.driven"], limit: 10 })))).entries
    expect(driven.map((e) => (e.payload as { cause: string }).cause)).toEqual(["released", "released"])
    await client.dispose()
  }, 120_000)

  it("with a single worker the released run waits, accepted and unowned, for the next start", async () => {
    const { client, db, getRun, rows } = setup()
    const env = { BATON_TEST_LOG: db.log }
    const only = startWorker(db.filename, "only", env)
    workers.push(only)
    await only.ready
    const runId = await client.runPromise(launch("runtime-test.steps", input))
    await waitFor("the first step's body", async () => (bodyLines(db.log).length > 0 ? true : undefined), 60_000)
    only.child.kill("SIGTERM")
    expect(await only.exited).toEqual({ code: 0, signal: null })
    const parkedSummary = await getRun(runId)
    expect(parkedSummary.status).toBe("accepted")
    expect(parkedSummary.ownerId).toBeUndefined()
    const again = startWorker(db.filename, "again", env)
    workers.push(again)
    const summary = await waitFor("completion", async () => {
      const s = await getRun(runId)
      return s.status === "completed" || s.status === "failed" ? s : undefined
    }, 60_000)
    expect(summary.status).toBe("completed")
    expect((await rows(runId)).map((r) => r.step).sort()).toEqual(["s0", "s1", "s2", "s3"])
    again.child.kill("SIGTERM")
    expect(await again.exited).toEqual({ code: 0, signal: null })
    await client.dispose()
  }, 120_000)
})
