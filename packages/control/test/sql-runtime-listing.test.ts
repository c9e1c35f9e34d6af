/**
 * SQL runtime listing and projection over engine rows (§19 checks 39, 42, 43, 44, 45, 55, 21, 31).
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import type * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as ControlExecutor from "../src/ControlExecutor.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import * as SqlControlRuntime from "../src/SqlControlRuntime.js"
import { launchF } from "./fixtures/runtimeContract.js"
import { insertEngineRows } from "./fixtures/runtimeRows.js"
import { unreadablePlanListing } from "./fixtures/unreadablePlan.js"
import { defaultFlows, flowF, sqliteRuntime } from "./fixtures/runtimeSupport.js"

type Env = SqlClient.SqlClient | DurableWriter.DurableWriter | RunStore.RunStore | ControlRuntime.ControlRuntime
const test = (title: string, body: Effect.Effect<void, unknown, Env>) => it.effect(title, () => Effect.provide(body, sqliteRuntime()))

const walk = (query: Omit<ControlRuntime.RunQuery, "cursor">) =>
  Effect.gen(function*() {
    const rt = yield* ControlRuntime.ControlRuntime
    const seen: Array<string> = []
    const pages: Array<ReadonlyArray<string>> = []
    let cursor: ControlRuntime.RunCursor | undefined
    for (;;) {
      const page = yield* rt.queryRuns({ ...query, ...(cursor === undefined ? {} : { cursor }) })
      seen.push(...page.items.map((r) => r.runId))
      pages.push(page.items.map((r) => r.runId))
      if (page.nextCursor === undefined) return { seen, pages }
      cursor = page.nextCursor
    }
  })

describe("SqlControlRuntime listing and projection", () => {
  test("a plan whose stored card does not decode is listed in place flagged readable: false, never failing the page", unreadablePlanListing)

  test("39: a malformed stored signal is quarantined without breaking other runs' signals", Effect.gen(function*() {
    const rt = yield* ControlRuntime.ControlRuntime
    yield* launchF({ a: 1 })
    yield* launchF({ a: 2 })
    yield* rt.admitSignal("c1", "run-1", { name: "go", payload: 1 })
    yield* rt.admitSignal("c2", "run-2", { name: "go", payload: 2 })
    yield* rt.admitSignal("c3", "run-1", { name: "go", payload: 3 })
    yield* rt.admitSignal("c4", "run-2", { name: "go", payload: 4 })
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE control_signal_commands SET payload_json = '{"name": 5}' WHERE command_id = 'c2'`
    yield* sql`UPDATE control_signal_commands SET principal_json = '{"id": 1}' WHERE command_id = 'c4'`
    expect((yield* rt.signalCommands({ runId: "run-2" })).map((c) => c.commandId)).toEqual([])
    expect((yield* rt.pendingSignals).map((c) => c.commandId)).toEqual(["c1", "c3"])
    const states = yield* sql<{ command_id: string; state: string }>`SELECT command_id, state FROM control_signal_commands ORDER BY seq`
    expect(states.map((s) => s.state)).toEqual(["pending", "rejected", "pending", "rejected"])
    expect(yield* rt.deliveredSignals("run-2")).toEqual([])
    expect(yield* rt.deliveredSignals("run-1")).toEqual([{ name: "go", payload: 1 }, { name: "go", payload: 3 }])
    expect((yield* rt.pendingSignals).map((c) => c.commandId)).toEqual(["c1", "c3"])
  }))

  test("43: a deleted row is skipped, a corrupt row is listed flagged, a cursor whose run was deleted is refused", Effect.gen(function*() {
    const rt = yield* ControlRuntime.ControlRuntime
    yield* insertEngineRows(["a", "b", "c", "d", "e"].map((runId) => ({ runId })))
    const first = yield* rt.queryRuns({ limit: 1 })
    expect(first.items.map((r) => r.runId)).toEqual(["a"])
    const sql = yield* SqlClient.SqlClient
    yield* sql`DELETE FROM flows_runs WHERE run_id = 'b'`
    yield* sql`UPDATE flows_runs SET state_json = '{"runId": 5}' WHERE run_id = 'd'`
    const second = yield* rt.queryRuns({ limit: 1, cursor: first.nextCursor! })
    expect(second.items.map((r) => r.runId)).toEqual(["c"])
    const third = yield* rt.queryRuns({ limit: 1, cursor: second.nextCursor! })
    expect(third.items).toMatchObject([{ runId: "d", readable: false, issue: "run d: flows_runs.state_json at runId: must be string" }])
    const fourth = yield* rt.queryRuns({ limit: 1, cursor: third.nextCursor! })
    expect(fourth.items.map((r) => [r.runId, r.readable])).toEqual([["e", undefined]])
    expect((yield* rt.queryRuns({ limit: 5, filters: { runIds: ["c", "e"] } })).items).toHaveLength(2)
    expect((yield* rt.queryRuns({ limit: 5, filters: { flowId: "E" } })).items.map((r) => r.runId)).toEqual(["a", "c", "e"])
    expect(yield* Effect.flip(rt.getRun("d"))).toMatchObject({ _tag: "PersistenceError", operation: "decode flows_runs.state_json" })
    yield* sql`DELETE FROM flows_runs WHERE run_id = 'c'`
    expect(yield* Effect.flip(rt.queryRuns({ limit: 1, cursor: second.nextCursor! }))).toMatchObject({ _tag: "InvalidInput" })
  }))

  test("42: engine rows page once each under every filter", Effect.gen(function*() {
    yield* insertEngineRows([{ runId: "root", flowName: "R", lineageId: "L", roundOrdinal: 0 }])
    yield* insertEngineRows(Array.from({ length: 22 }, (_, i) => ({
      runId: `e${String(i).padStart(2, "0")}`,
      flowName: i % 2 === 0 ? "even" : "odd",
      status: i % 3 === 0 ? "completed" as const : i % 3 === 1 ? "suspended" as const : "pending" as const,
      ...(i % 4 === 0 ? { parentRunId: "root" } : {}),
      ...(i % 5 === 0 ? { lineageId: "L", roundOrdinal: i + 1 } : {}),
      createdAtMs: i
    })))
    const rt = yield* ControlRuntime.ControlRuntime
    const all = (yield* walk({ limit: 5 })).seen
    expect(all).toHaveLength(23)
    expect(new Set(all).size).toBe(23)
    const filters: ReadonlyArray<[ControlRuntime.RunFilters, (s: import("../src/ControlSchema.js").RunSummary) => boolean]> = [
      [{ flowId: "even" }, (s) => s.flowId === "even"],
      [{ status: "parked" }, (s) => s.status === "parked"],
      [{ status: "accepted" }, (s) => s.status === "accepted"],
      [{ terminal: true }, (s) => s.status === "completed"],
      [{ lineageId: "L" }, (s) => s.lineageId === "L"],
      [{ parentRunId: "root" }, (s) => s.parentRunId === "root"],
      [{ since: 5, until: 10 }, (s) => s.createdAt >= 5 && s.createdAt < 10]
    ]
    for (const [filter, predicate] of filters) {
      const { seen } = yield* walk({ limit: 5, filters: filter })
      const items = (yield* rt.queryRuns({ limit: 500, filters: { runIds: all } })).items
      const expected = items.filter(predicate).map((s) => s.runId)
      expect(seen).toEqual(expected)
      expect(expected.length).toBeGreaterThan(0)
    }
    const cursorless = yield* rt.queryRuns({ limit: 23 })
    expect(cursorless.nextCursor).toBeUndefined()
    for (const limit of [0, 501]) expect(yield* Effect.flip(rt.queryRuns({ limit }))).toMatchObject({ _tag: "InvalidInput" })
  }))

  test("44: newest terminal rows first, each once, with many equal timestamps", Effect.gen(function*() {
    yield* insertEngineRows(Array.from({ length: 505 }, (_, i) => ({
      runId: `t${i}`,
      status: i === 250 ? "suspended" as const : "completed" as const,
      createdAtMs: i < 400 ? 1000 : 1000 + i
    })))
    const rt = yield* ControlRuntime.ControlRuntime
    const first = yield* rt.queryRuns({ limit: 2, order: "newest", filters: { terminal: true } })
    expect(first.items.map((r) => r.runId)).toEqual(["t504", "t503"])
    const { seen } = yield* walk({ limit: 2, order: "newest", filters: { terminal: true } })
    expect(seen).toHaveLength(504)
    expect(new Set(seen).size).toBe(504)
    expect((yield* walk({ limit: 2, filters: { terminal: false } })).seen).toEqual(["t250"])
  }))

  test("45: an approval wait rolls up to attached ancestors and stops at a detached spawn", Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE flows_run_parents (seq INTEGER NOT NULL, child_id TEXT NOT NULL, parent_id TEXT NOT NULL)`
    const token = ControlExecutor.waitToken("E", "grandchild", "gate", 2)
    yield* insertEngineRows([
      { runId: "root", status: "suspended" },
      { runId: "child", status: "suspended" },
      {
        runId: "grandchild",
        status: "suspended",
        waitingReason: "approval",
        waitingToken: token,
        waitingRequest: "{\"ask\":1}",
        createdAtMs: 5
      }
    ])
    yield* sql`INSERT INTO flows_run_parents (seq, child_id, parent_id) VALUES (1, 'child', 'root'), (2, 'grandchild', 'child')`
    const rt = yield* ControlRuntime.ControlRuntime
    for (const runId of ["root", "child", "grandchild"]) {
      const run = yield* rt.getRun(runId)
      expect(run.status).toBe("waiting-approval")
      expect(run.pendingWaits).toEqual([{
        runId: "grandchild",
        flowId: "E",
        reason: "approval",
        token,
        tokenDigest: expect.stringMatching(/^[0-9a-f]{64}$/),
        name: "gate",
        attempt: 2,
        request: { ask: 1 },
        createdAt: 5
      }])
    }
    expect((yield* rt.getRun("grandchild")).parentRunId).toBe("child")
    expect((yield* rt.getRun("child")).origin).toBe("child")
    expect((yield* walk({ limit: 2, filters: { status: "waiting-approval" } })).seen).toEqual(["root", "child", "grandchild"])
    expect((yield* walk({ limit: 2, filters: { parentRunId: "root" } })).seen).toEqual(["child"])
    yield* sql`UPDATE flows_runs SET state_json = '{"flowName":"E","onParentExit":"detach"}' WHERE run_id = 'child'`
    expect((yield* rt.getRun("root")).status).toBe("parked")
    expect((yield* rt.getRun("root")).pendingWaits).toBeUndefined()
    expect((yield* rt.getRun("child")).status).toBe("waiting-approval")
    expect((yield* walk({ limit: 2, filters: { status: "waiting-approval" } })).seen).toEqual(["child", "grandchild"])
    yield* sql`DROP TABLE flows_run_parents`
    expect((yield* rt.getRun("grandchild")).status).toBe("waiting-approval")
    expect((yield* rt.getRun("root")).status).toBe("parked")
    expect((yield* walk({ limit: 2, filters: { status: "waiting-approval" } })).seen).toEqual(["grandchild"])
    expect((yield* walk({ limit: 2, filters: { parentRunId: "root" } })).seen).toEqual([])
  }))

  test("55: host candidates are released, stale-owner and orphaned-claim launches of the asked flows", Effect.gen(function*() {
    const rt = yield* ControlRuntime.ControlRuntime
    const sql = yield* SqlClient.SqlClient
    yield* launchF({ r: "released" })
    yield* rt.releasePending("run-1", yield* rt.claimFence("run-1"))
    yield* launchF({ r: "stale" })
    yield* rt.writeStatus("run-2", yield* rt.claimFence("run-2"), "running")
    yield* launchF({ r: "claim" })
    yield* rt.releasePending("run-3", yield* rt.claimFence("run-3"))
    yield* sql`UPDATE flows_runs SET claim_host_id = 'x', claim_pid = 1, claim_nonce = 'n', claimed_at_ms = 0 WHERE run_id = 'run-3'`
    yield* launchF({ r: "parked" })
    yield* rt.park("run-4", yield* rt.claimFence("run-4"), { reason: "event", token: "T" })
    yield* launchF({ r: "done" })
    yield* rt.writeStatus("run-5", yield* rt.claimFence("run-5"), "completed")
    yield* insertEngineRows([{ runId: "engine", status: "running", heartbeatAtMs: 0 }])
    yield* TestClock.adjust("31 seconds")
    const { card } = yield* rt.plan({ flowId: "G", input: {} })
    const token = yield* rt.lookupApproval(card.approval.target)
    yield* rt.resolveApproval(token, "approved", yield* rt.stampPrincipal())
    yield* rt.launch(card.planId, card.digest, card.envelope)
    const page = yield* rt.hostCandidates({ flowIds: ["F"], nowMs: 31_000, limit: 10 })
    // Lapsed leases first (runs already under way), then released runs.
    expect(page.candidates.map((c) => [c.runId, c.kind])).toEqual([
      ["run-2", "stale-owner"],
      ["run-3", "orphaned-claim"],
      ["run-1", "released"]
    ])
    expect(page.candidates[0]).toMatchObject({ heartbeatAtMs: 0, owner: { pid: 1 }, flowId: "F", createdSeq: 2, queue: "default" })
    expect(page.candidates[1]).toMatchObject({ claimedAtMs: 0, claim: { hostId: "x", pid: 1, nonce: "n" } })
    expect(page.newestHeartbeatAtMs).toBe(0)
    const both = yield* rt.hostCandidates({ nowMs: 31_000, limit: 10 })
    expect(both.candidates.map((c) => c.runId)).toEqual(["run-2", "run-3", "run-1"])
    expect(both.newestHeartbeatAtMs).toBe(31_000)
    expect(yield* Effect.flip(rt.hostCandidates({ nowMs: -1, limit: 10 }))).toMatchObject({ _tag: "InvalidInput" })
  }))

  test("21: a resolved token whose decision was erased fails PersistenceError", Effect.gen(function*() {
    const rt = yield* ControlRuntime.ControlRuntime
    const { card } = yield* launchF()
    const target = { _tag: "Node" as const, runId: "run-1", requestId: "r", digest: "d", envelope: card.envelope }
    yield* rt.registerApproval(target)
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE control_tokens SET resolved = 1 WHERE target_tag = 'Node'`
    expect(yield* Effect.flip(rt.registerApproval(target))).toMatchObject({ _tag: "PersistenceError" })
    expect(yield* Effect.flip(rt.lookupApproval(target))).toMatchObject({ _tag: "PersistenceError" })
  }))

  test("31: code drift against the catalog, adoption records the new digest, rounds inherit", Effect.gen(function*() {
    const rt = yield* ControlRuntime.ControlRuntime
    yield* launchF()
    yield* rt.park("run-1", yield* rt.claimFence("run-1"), { reason: "event", token: "T" })
    const moved = yield* SqlControlRuntime.make({ flows: [{ ...flowF, executionDigest: "d2" }, ...defaultFlows.slice(1)] })
    expect(yield* moved.codeDrift("run-1")).toMatchObject({ _tag: "CodeDrift", recorded: "d1", current: "d2", flowId: "F" })
    expect(yield* rt.codeDrift("run-1")).toBeUndefined()
    const adopted = yield* moved.resumeAdopting("run-1")
    expect(adopted.executionDigest).toBe("d2")
    expect(yield* moved.codeDrift("run-1")).toBeUndefined()
    yield* insertEngineRows([{ runId: "round", parentRunId: "run-1", state: { runId: "round", flowId: "F", status: "parked", createdAt: 0, updatedAt: 0 } }])
    expect(yield* rt.recordedCode("round")).toEqual({ executionDigest: "d2" })
    expect(yield* rt.codeDrift("round")).toMatchObject({ recorded: "d2", current: "d1" })
    const gone = yield* SqlControlRuntime.make({ flows: [] })
    expect(yield* Effect.flip(gone.resumeAdopting("round"))).toMatchObject({ _tag: "CodeDrift" })
    const pinned = yield* SqlControlRuntime.make({ flows: [], pinnedFlow: () => Effect.succeed(true) })
    expect(yield* pinned.codeDrift("round")).toBeUndefined()
  }))
})
