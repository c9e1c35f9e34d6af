/**
 * node.md check 6: an owner SIGSTOPped until a peer with another host id took the run over,
 * then SIGCONTed mid-step, commits nothing: its drive ends `lease-lost`, and every step's row
 * exists once, written by the peer for the step it took over.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, ManagedRuntime } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { appSet, flows } from "./fixtures/runtimeFlows.js"
import { bodyLines, startWorker, stopAll, tempDb, waitFor, type Worker } from "./fixtures/runtimeProcesses.js"
import { launch } from "./fixtures/runtimeSupport.js"
import { stopOutsideWrite } from "./fixtures/sqliteLock.js"

const workers: Array<Worker> = []
afterAll(() => stopAll(workers))

describe("runtime: a stopped owner resumed after a takeover", () => {
  it("writes nothing more and ends lease-lost; the peer's rows exist once", async () => {
    const db = tempDb()
    const client = ManagedRuntime.make(
      NodeRuntime.layer({ filename: db.filename, mode: "client", flows, migrations: [appSet] })
    )
    const getRun = (runId: string) =>
      client.runPromise(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
    const w1 = startWorker(db.filename, "w1", { BATON_TEST_LOG: db.log, BATON_TEST_HOST_ID: "host-a" })
    const w2 = startWorker(db.filename, "w2", { BATON_TEST_LOG: db.log, BATON_TEST_HOST_ID: "host-b" })
    workers.push(w1, w2)
    await Promise.all([w1.ready, w2.ready])
    const runId = await client.runPromise(launch("runtime-test.steps", { count: 3, stepMs: 6000, chunks: 6 }))
    const ownerPid = await waitFor("the owner running s1", async () => {
      const s1 = bodyLines(db.log).find((b) => b.step === "s1")
      return s1?.pid
    }, 60_000)
    const a = [w1, w2].find((w) => w.child.pid === ownerPid)!
    const b = a === w1 ? w2 : w1
    const peerHost = b === w1 ? "host-a" : "host-b"
    // Stopped outside a write: a process stopped inside a SQLite transaction would block every writer.
    await stopOutsideWrite(a.child, db.filename)
    await waitFor("the peer owns the run", async () => {
      const summary = await getRun(runId)
      return summary.ownerId !== undefined && JSON.parse(summary.ownerId).hostId === peerHost ? true : undefined
    }, 90_000).catch((error) => {
      console.log("BLINES " + JSON.stringify(b.lines.slice(-40)) + " ALINES " + JSON.stringify(a.lines.slice(-20)))
      throw error
    })
    a.child.kill("SIGCONT")
    await waitFor("a's drive to end", async () =>
      a.lines.some((line) => line.startsWith("event ") && line.includes("\"settled\"")) ? true : undefined, 60_000)
    const settled = a.lines.filter((line) => line.includes("\"settled\"")).map((line) => JSON.parse(line.slice(6)))
    expect(settled).toEqual([{ _tag: "settled", runId, reason: "lease-lost" }])
    const summary = await waitFor("completion", async () => {
      const s = await getRun(runId)
      return s.status === "completed" || s.status === "failed" ? s : undefined
    }, 60_000)
    expect(summary.status).toBe("completed")
    const rows = await client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ step: string; pid: number }>`SELECT step, pid FROM runtime_test_rows WHERE run_id = ${runId}`))
    expect(rows.map((r) => r.step).sort()).toEqual(["s0", "s1", "s2"])
    expect(rows.find((r) => r.step === "s1")?.pid).toBe(b.child.pid)
    expect(rows.find((r) => r.step === "s2")?.pid).toBe(b.child.pid)
    await client.dispose()
  }, 200_000)
})
