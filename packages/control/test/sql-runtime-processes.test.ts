/**
 * Cross-process checks on one SQLite file with real OS processes (§19 checks 4, 5, 16, 25, 28; issue must-holds:
 * listing while another process inserts, parks by live and dead hosts).
 */
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import type { RunSummary } from "../src/ControlSchema.js"
import { line, parentLayer, racers, tempFile, worker } from "./fixtures/runtimeProcesses.js"
import { countRows } from "./fixtures/runtimeRows.js"

describe("SqlControlRuntime across processes", () => {
  it.live("4, 5, 16, 25: two processes race plans, an approval and a resume on one file", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      const rt = yield* ControlRuntime.ControlRuntime
      const sql = yield* SqlClient.SqlClient
      const plans = (key: string) =>
        Effect.map(sql<{ n: number }>`SELECT COUNT(*) AS n FROM control_plans p JOIN control_plan_keys k ON k.plan_id = p.plan_id
          WHERE k.idempotency_key = ${key}`, (rows) => Number(rows[0]!.n))
      // The parent prepares the approval race's plan and the resume race's released run first.
      const { card } = yield* rt.plan({ flowId: "F", input: { r: 1 }, idempotencyKey: "rk" })
      const { card: launchCard } = yield* rt.plan({ flowId: "F", input: { launch: 1 } })
      yield* rt.resolveApproval(yield* rt.lookupApproval(launchCard.approval.target), "approved", yield* rt.stampPrincipal())
      yield* rt.launch(launchCard.planId, launchCard.digest, launchCard.envelope)
      yield* rt.releasePending("run-1", yield* rt.claimFence("run-1"))
      const shared = [
        { op: "plan", key: "k", input: { a: 1 } },
        { op: "plan", key: "k2", input: { a: 1 } },
        { op: "resolve", key: "rk", input: { r: 1 }, decision: "approved" },
        { op: "resume", runId: "run-1" }
      ]
      const other = [shared[0], { op: "plan", key: "k2", input: { a: 2 } }, { ...shared[2], decision: "denied" }, shared[3]]
      const { step, finish } = racers(file, shared, other)

      // 4: one plan exists and both get the same card.
      const planned = yield* step(0)
      expect(planned.every((o) => o.ok !== undefined)).toBe(true)
      expect(planned[0]!.ok.card).toEqual(planned[1]!.ok.card)
      expect(planned.filter((o) => o.ok.created).length).toBe(1)
      expect(yield* plans("k")).toBe(1)

      // 5: the same key with another input: one plan, the other InvalidInput, no row for the loser.
      const conflicted = yield* step(1)
      expect(conflicted.filter((o) => o.ok !== undefined)).toHaveLength(1)
      expect(conflicted.find((o) => o.error !== undefined)!.error).toMatchObject({
        _tag: "InvalidInput",
        issue: "idempotency key k2 was used for another plan"
      })
      expect(yield* plans("k2")).toBe(1)
      expect(yield* countRows("control_plans")).toBe(4)
      expect(yield* countRows("control_tokens")).toBe(4)

      // 16: exactly one decision lands; the other is AlreadyResolved.
      const decided = yield* step(2)
      const winner = decided.findIndex((o) => o.error === undefined)
      expect(winner).toBeGreaterThanOrEqual(0)
      expect(decided[1 - winner]!.error).toMatchObject({ _tag: "AlreadyResolved", requestId: card.planId })
      expect(yield* Effect.flip(rt.lookupApproval(card.approval.target))).toMatchObject({ _tag: "AlreadyResolved" })
      const [token] = yield* sql<{ resolved: number; decision_json: string }>`SELECT resolved, decision_json FROM control_tokens
        WHERE target_id = ${card.planId}`
      expect(Number(token!.resolved)).toBe(1)
      expect(JSON.parse(token!.decision_json)._tag).toBe(winner === 0 ? "Approved" : "Denied")
      expect((yield* rt.getPlan(card.planId)).decision).toBe(winner === 0 ? "approved" : "denied")

      // 25: one resume claims; the other loses; only the winner's fence holds.
      const resumed = yield* step(3)
      const winners = resumed.filter((o) => o.ok !== undefined)
      expect(winners).toHaveLength(1)
      expect(resumed.find((o) => o.error !== undefined)!.error).toMatchObject({ _tag: "ClaimLost" })
      const [summary, fence] = winners[0]!.ok as [RunSummary, string]
      expect(summary.ownerId).toBe(fence)
      const store = yield* RunStore.RunStore
      expect((yield* store.get("run-1")).owner).toEqual(JSON.parse(fence))
      expect(yield* Effect.flip(rt.claimFence("run-1"))).toMatchObject({ _tag: "ClaimLost" })
      yield* finish
    }).pipe(Effect.provide(parentLayer(file)))
  }, 240_000)

  it.live("a run parked by a live host: resume names it, the delegation is picked up by that host", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      const rt = yield* ControlRuntime.ControlRuntime
      const child = spawnFixture(worker, [file, "park-host"])
      const done = completion(child)
      const runId = yield* Effect.promise(() => line(child, (v) => v.parked as string | undefined))
      const refused = yield* Effect.flip(rt.resume(runId, { scope: "launched" }))
      expect(refused).toMatchObject({ _tag: "ClaimLost", parkedBy: { hostId: "h", pid: child.pid } })
      expect((yield* rt.getRun(runId)).status).toBe("parked")
      const seq = yield* rt.requestResume(runId, { consent: 1 })
      expect(yield* rt.pendingResumes).toEqual([{ runId, sequence: seq, requestedAtMs: expect.any(Number), consent: 1 }])
      const exit = yield* Effect.promise(() => done)
      expect(exit.code).toBe(0)
      expect(exit.stdout).toContain(`"completed":"${runId}"`)
      expect((yield* rt.getRun(runId)).status).toBe("completed")
      expect(yield* rt.pendingResumes).toEqual([])
    }).pipe(Effect.provide(parentLayer(file)))
  }, 240_000)

  it.live("a run parked by a dead host on this host is taken over", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      const rt = yield* ControlRuntime.ControlRuntime
      const child = spawnFixture(worker, [file, "park-host", "exit"])
      const runId = yield* Effect.promise(() => line(child, (v) => v.parked as string | undefined))
      const exit = yield* Effect.promise(() => completion(child))
      expect(exit.code).toBe(0)
      const taken = yield* rt.resume(runId, { scope: "launched" })
      expect(taken.status).toBe("accepted")
      expect(JSON.parse(taken.ownerId!)).toMatchObject({ hostId: "h", pid: process.pid })
      expect(taken.parkedBy).toBeUndefined()
    }).pipe(Effect.provide(parentLayer(file)))
  }, 240_000)
})
