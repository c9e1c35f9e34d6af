/**
 * B-006 (node.md check 14): a restarted process with the dead owner's host id and pid (given
 * through the identity overrides) is another incarnation: it never joins the dead owner's runs
 * nor writes with its fence, and takes both runs over once their leases are stale.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Companion from "@baton/journal/Companion"
import * as Journal from "@baton/journal/Journal"
import type * as OwnerId from "@baton/journal/OwnerId"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, ManagedRuntime, Option } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as ProcessLiveness from "../src/ProcessLiveness.js"
import { appSet, flows } from "./fixtures/runtimeFlows.js"
import { startWorker, stopAll, tempDb, unshareWorks, waitFor, type Worker } from "./fixtures/runtimeProcesses.js"
import { launch } from "./fixtures/runtimeSupport.js"

const workers: Array<Worker> = []
const namespaces = unshareWorks()
afterAll(() => stopAll(workers))

describe.concurrent("runtime: same host id and pid after a restart (B-006)", () => {
  it("the new process takes over the dead owner's runs as another incarnation", async () => {
    const db = tempDb()
    const client = ManagedRuntime.make(
      NodeRuntime.layer({ filename: db.filename, mode: "client", flows, migrations: [appSet] })
    )
    const getRun = (runId: string) =>
      client.runPromise(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
    const identity = { BATON_TEST_HOST_ID: "reuse-host", BATON_TEST_PID: "4242421" }
    const a = startWorker(db.filename, "a", identity)
    workers.push(a)
    await a.ready
    const input = { count: 5, stepMs: 1500, chunks: 3 }
    const runs = [
      await client.runPromise(launch("runtime-test.steps", input)),
      await client.runPromise(launch("runtime-test.steps", input))
    ]
    const owners = await waitFor("both runs owned by a", async () => {
      const found: Array<OwnerId.OwnerId> = []
      for (const runId of runs) {
        const summary = await getRun(runId)
        if (summary.ownerId === undefined) return undefined
        found.push(JSON.parse(summary.ownerId))
      }
      return found
    }, 60_000)
    for (const owner of owners) expect(owner).toMatchObject({ hostId: "reuse-host", pid: 4242421 })
    a.child.kill("SIGKILL")
    await a.exited

    // B's probe (same host id and pid, another incarnation) reports A as a previous incarnation.
    const b = startWorker(db.filename, "b", identity)
    workers.push(b)
    const bReady = await b.ready
    expect(bReady).toMatchObject({ hostId: "reuse-host", identityPid: 4242421 })
    const probeOfB = ProcessLiveness.makeWith({
      identity: { hostId: "reuse-host", pid: 4242421, incarnation: "n1-1-bbbbbbbbbbbb", startTicks: Option.none() }
    })
    const verdict = await Effect.runPromise(probeOfB.probe(owners[0]!, {
      claimant: { hostId: "reuse-host", pid: 4242421, nonce: "n1-1-bbbbbbbbbbbb.x" },
      heartbeatAtMs: 0,
      nowMs: 1
    }))
    expect(verdict).toMatchObject({ alive: false, reason: "previous-incarnation" })

    for (const runId of runs) {
      const summary = await waitFor(`completion of ${runId}`, async () => {
        const s = await getRun(runId)
        return s.status === "completed" || s.status === "failed" ? s : undefined
      }, 120_000)
      expect(summary.status).toBe("completed")
    }
    for (const [index, runId] of runs.entries()) {
      const dead = owners[index]!
      const facts = (await client.runPromise(Companion.entries(Companion.runStore.stream, runId, { limit: 100 })))
        .entries.map((e) => ({ type: e.eventType, owner: (e.payload as { owner: OwnerId.OwnerId }).owner }))
      // B stole and activated under its own nonce; it never re-owned with A's fence.
      const stolen = facts.find((f) => f.type === "flows.consensus.stolen")
      expect(stolen?.owner).toMatchObject({ hostId: "reuse-host", pid: 4242421 })
      expect(stolen?.owner.nonce).not.toBe(dead.nonce)
      expect(stolen?.owner.nonce.split(".")[0]).not.toBe(dead.nonce.split(".")[0])
      expect(facts.some((f) => f.type === "flows.consensus.activated" && f.owner.nonce === stolen?.owner.nonce)).toBe(true)
      const released = facts.filter((f) => f.type === "flows.consensus.released" && f.owner.nonce === dead.nonce)
      expect(released).toEqual([])
      const journal = await client.runPromise(Effect.flatMap(Journal.Journal, (j) =>
        j.entries({ runId: runId as never, limit: 1000 })))
      const takeover = journal.entries.find((e) => e.eventType === "baton.run.taken-over")
      expect(takeover?.payload).toMatchObject({ from: dead, evidence: "same-host-pid-dead" })
      const driven = journal.entries.filter((e) => e.eventType === "baton.run.driven").map((e) => e.payload)
      // A may die between its claim and its first entry; B's drive is the last, a takeover.
      expect(driven.at(-1)).toMatchObject({ cause: "takeover", owner: { hostId: "reuse-host", pid: 4242421 } })
      expect(driven.slice(0, -1).every((d) => (d as { cause: string }).cause === "released")).toBe(true)
      const rows = await client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ step: string }>`SELECT step FROM runtime_test_rows WHERE run_id = ${runId}`))
      expect(rows.map((r) => r.step).sort()).toEqual(["s0", "s1", "s2", "s3", "s4"])
    }
    expect(b.lines.some((line) => /found \d+ runs owned by an earlier process with this pid/.test(line))).toBe(true)
    await client.dispose()
  }, 180_000)

  it.skipIf(!namespaces)("with two real pid-1 processes (unshare --pid): each namespace is its own host id and the second takes over", async () => {
    const db = tempDb()
    const client = ManagedRuntime.make(
      NodeRuntime.layer({ filename: db.filename, mode: "client", flows, migrations: [appSet] })
    )
    const getRun = (runId: string) =>
      client.runPromise(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
    const a = startWorker(db.filename, "a", {}, { pidNamespace: true })
    workers.push(a)
    const aReady = await a.ready
    expect(aReady.pid).toBe(1)
    const runId = await client.runPromise(launch("runtime-test.steps", { count: 4, stepMs: 1500, chunks: 3 }))
    const dead = await waitFor("a owns the run", async () => {
      const summary = await getRun(runId)
      return summary.ownerId === undefined ? undefined : (JSON.parse(summary.ownerId) as OwnerId.OwnerId)
    }, 60_000)
    expect(dead).toMatchObject({ hostId: aReady.hostId, pid: 1 })
    a.child.kill("SIGKILL")
    await a.exited
    const b = startWorker(db.filename, "b", {}, { pidNamespace: true })
    workers.push(b)
    const bReady = await b.ready
    expect(bReady.pid).toBe(1)
    // Same hostname and boot, another pid namespace: another host id, so leases decide.
    expect(bReady.hostId.split("/").slice(0, 2)).toEqual(aReady.hostId.split("/").slice(0, 2))
    expect(bReady.hostId).not.toBe(aReady.hostId)
    const summary = await waitFor("completion", async () => {
      const s = await getRun(runId)
      return s.status === "completed" || s.status === "failed" ? s : undefined
    }, 120_000)
    expect(summary.status).toBe("completed")
    const facts = (await client.runPromise(Companion.entries(Companion.runStore.stream, runId, { limit: 100 })))
      .entries.map((e) => ({ type: e.eventType, owner: (e.payload as { owner: OwnerId.OwnerId }).owner }))
    const stolen = facts.find((f) => f.type === "flows.consensus.stolen")
    expect(stolen?.owner).toMatchObject({ hostId: bReady.hostId, pid: 1 })
    const journal = await client.runPromise(Effect.flatMap(Journal.Journal, (j) =>
      j.entries({ runId: runId as never, limit: 1000 })))
    expect(journal.entries.find((e) => e.eventType === "baton.run.taken-over")?.payload)
      .toMatchObject({ from: dead, evidence: "lease-expired" })
    await client.dispose()
  }, 180_000)
})
