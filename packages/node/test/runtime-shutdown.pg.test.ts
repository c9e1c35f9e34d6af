/**
 * node.md check 29 with check 16 at the runtime level [pg]: two `layerPg` worker processes on one
 * fresh schema; SIGTERM to the owner mid-step releases the run (`baton.run.released { reason:
 * "shutdown" }`, the in-flight attempt `interrupted` with its checkpoint) and the other worker
 * resumes that step from the checkpoint and finishes the run, every step's row once. With a
 * single worker the released run waits, accepted and unowned, for the worker's restart.
 */
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import * as crypto from "node:crypto"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { appSet, flows } from "./fixtures/runtimeFlows.js"
import { bodyLines, startWorker, stopAll, tempDb, waitFor, type Worker } from "./fixtures/runtimeProcesses.js"
import { launch } from "./fixtures/runtimeSupport.js"

const url = TestDatabase.postgresTestUrl("node runtime SIGTERM on PostgreSQL (checks 16, 29)")

const workers: Array<Worker> = []
afterAll(() => stopAll(workers))

describe.skipIf(url === undefined)("runtime on PostgreSQL: SIGTERM of the owner", () => {
  it("the run is released with the interrupted attempt's checkpoint and the other worker finishes it", async () => {
    const schema = `node_${crypto.randomBytes(12).toString("hex")}`
    const db = tempDb()
    const client = ManagedRuntime.make(
      NodeRuntime.layerPg({ url: url!, schema, mode: "client", hostId: "pg-client", flows, migrations: [appSet] })
    )
    try {
      const read = <A, E>(effect: Effect.Effect<A, E, ManagedRuntime.ManagedRuntime.Context<typeof client>>) =>
        client.runPromise(effect)
      const getRun = (runId: string) => read(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
      // The client migrates the schema first, so the workers do not race on a new schema.
      await read(Effect.void)
      const env = { BATON_TEST_LOG: db.log, BATON_TEST_WORKER_PG_URL: url!, BATON_TEST_WORKER_PG_SCHEMA: schema }
      const w1 = startWorker("unused", "w1", env)
      const w2 = startWorker("unused", "w2", env)
      workers.push(w1, w2)
      await Promise.all([w1.ready, w2.ready])
      const runId = await read(launch("runtime-test.steps", { count: 4, stepMs: 4000, chunks: 16 }))
      // Terminate while the second step's body runs, after it wrote a checkpoint.
      const ownerPid = await waitFor("the second step's checkpoint", async () => {
        const attempts = await read(Effect.flatMap(AttemptStore.AttemptStore, (s) => s.list(runId)))
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
      const journal = await read(Effect.flatMap(Journal.Journal, (j) => j.entries({ runId: runId as never, limit: 1000 })))
      expect(journal.entries.find((e) => e.eventType === "baton.run.released")?.payload).toMatchObject({ reason: "shutdown", drive: 1 })
      const summary = await waitFor("completion", async () => {
        const s = await getRun(runId)
        return s.status === "completed" || s.status === "failed" ? s : undefined
      }, 60_000)
      expect(summary.status).toBe("completed")
      const attempts = await read(Effect.flatMap(AttemptStore.AttemptStore, (s) => s.list(runId)))
      const s1 = attempts.filter((a) => (a.meta as { name: string }).name === "s1").sort((a, b) => a.attempt - b.attempt)
      expect(s1.map((a) => a.state)).toEqual(["interrupted", "completed"])
      expect(s1[0]?.checkpoint).toBeDefined()
      const bodies = bodyLines(db.log).filter((b) => b.step === "s1")
      expect(bodies.map((b) => b.pid)).toEqual([victim.child.pid, survivor.child.pid])
      expect(bodies[1]?.resumeFrom).toEqual(s1[0]?.checkpoint)
      const rows = await read(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ step: string }>`SELECT step FROM runtime_test_rows WHERE run_id = ${runId}`))
      expect(rows.map((r) => r.step).sort()).toEqual(["s0", "s1", "s2", "s3"])
      const driven = (await read(Effect.flatMap(Journal.Journal, (j) =>
        j.entries({ runId: runId as never, eventTypes: ["baton.run.driven"], limit: 10 })))).entries
      expect(driven.map((e) => (e.payload as { cause: string }).cause)).toEqual(["released", "released"])
    } finally {
      await client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)))
        .catch(() => undefined)
      await client.dispose()
    }
  }, 120_000)
  it("with a single worker the released run waits, accepted and unowned, for the next start", async () => {
    const schema = `node_${crypto.randomBytes(12).toString("hex")}`
    const db = tempDb()
    const client = ManagedRuntime.make(
      NodeRuntime.layerPg({ url: url!, schema, mode: "client", hostId: "pg-client", flows, migrations: [appSet] })
    )
    try {
      const read = <A, E>(effect: Effect.Effect<A, E, ManagedRuntime.ManagedRuntime.Context<typeof client>>) =>
        client.runPromise(effect)
      const getRun = (runId: string) => read(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
      await read(Effect.void)
      const env = { BATON_TEST_LOG: db.log, BATON_TEST_WORKER_PG_URL: url!, BATON_TEST_WORKER_PG_SCHEMA: schema }
      const only = startWorker("unused", "only", env)
      workers.push(only)
      await only.ready
      const runId = await read(launch("runtime-test.steps", { count: 3, stepMs: 3000, chunks: 6 }))
      await waitFor("the first step's body", async () => (bodyLines(db.log).length > 0 ? true : undefined), 60_000)
      only.child.kill("SIGTERM")
      expect(await only.exited).toEqual({ code: 0, signal: null })
      const released = await getRun(runId)
      expect(released.status).toBe("accepted")
      expect(released.ownerId).toBeUndefined()
      const again = startWorker("unused", "again", env)
      workers.push(again)
      const summary = await waitFor("completion", async () => {
        const s = await getRun(runId)
        return s.status === "completed" || s.status === "failed" ? s : undefined
      }, 60_000)
      expect(summary.status).toBe("completed")
      const rows = await read(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ step: string }>`SELECT step FROM runtime_test_rows WHERE run_id = ${runId}`))
      expect(rows.map((r) => r.step).sort()).toEqual(["s0", "s1", "s2"])
      again.child.kill("SIGTERM")
      expect(await again.exited).toEqual({ code: 0, signal: null })
    } finally {
      await client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)))
        .catch(() => undefined)
      await client.dispose()
    }
  }, 120_000)
})
