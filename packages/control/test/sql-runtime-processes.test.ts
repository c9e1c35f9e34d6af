/**
 * Cross-process checks on one SQLite file with real OS processes (§19 checks 4, 5, 16, 25, 28; issue must-holds:
 * listing while another process inserts, parks by live and dead hosts).
 */
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import type { RunSummary } from "../src/ControlSchema.js"
import { isTerminalStatus } from "../src/ControlSchema.js"
import * as SqlControlRuntime from "../src/SqlControlRuntime.js"
import { launchF } from "./fixtures/runtimeContract.js"
import { countRows, insertEngineRows } from "./fixtures/runtimeRows.js"
import { defaultFlows, sqliteFile } from "./fixtures/runtimeSupport.js"

const worker = new URL("./fixtures/runtimeWorker.ts", import.meta.url)

const tempFile = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "control-runtime-")), "baton.db")

const isAlive = (owner: { readonly pid: number }) =>
  Effect.sync(() => {
    try {
      process.kill(owner.pid, 0)
      return true
    } catch (e) {
      return (e as { code?: string }).code !== "ESRCH"
    }
  })

const parentLayer = (file: string) =>
  Layer.provideMerge(
    Layer.orDie(SqlControlRuntime.layer({ flows: defaultFlows, owner: { hostId: "h", pid: process.pid, nonce: "parent" }, isAlive })),
    Layer.provideMerge(RunStore.layer, sqliteFile(file))
  )

/** Resolve with the first JSON line of `child` that satisfies `pick`. */
const line = <A>(child: ChildProcess, pick: (value: any) => A | undefined): Promise<A> =>
  new Promise((resolve, reject) => {
    let buffer = ""
    const onData = (chunk: unknown) => {
      buffer += String(chunk)
      const lines = buffer.split("\n")
      buffer = lines.pop()!
      for (const text of lines) {
        const picked = pick(JSON.parse(text))
        if (picked !== undefined) {
          child.stdout?.off("data", onData)
          resolve(picked)
          return
        }
      }
    }
    child.stdout?.on("data", onData)
    child.once("exit", (code) => reject(new Error(`worker exited ${code} before the expected line`)))
  })

const race = (file: string, argsA: Array<string>, argsB: Array<string>) =>
  Effect.promise(async () => {
    const children = [spawnFixture(worker, [file, ...argsA]), spawnFixture(worker, [file, ...argsB])]
    const results = children.map((child) => line(child, (v) => ("ok" in v || "error" in v ? v : undefined)))
    const done = children.map(completion)
    await Promise.all(children.map((child) => line(child, (v) => v.ready)))
    fs.writeFileSync(`${file}.latch`, "go")
    const outcomes = await Promise.all(results)
    const exits = await Promise.all(done)
    for (const exit of exits) if (exit.code !== 0) throw new Error(exit.stderr)
    return outcomes as Array<{ ok?: any; error?: any }>
  })

describe("SqlControlRuntime across processes", () => {
  it.live("4: two processes plan under one key: one plan, the same card for both", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      const outcomes = yield* race(file, ["plan", "k", "{\"a\":1}"], ["plan", "k", "{\"a\":1}"])
      expect(outcomes.every((o) => o.ok !== undefined)).toBe(true)
      expect(outcomes[0]!.ok.card).toEqual(outcomes[1]!.ok.card)
      expect(outcomes.filter((o) => o.ok.created).length).toBe(1)
      for (const table of ["control_plans", "control_plan_keys", "control_tokens"]) expect(yield* countRows(table)).toBe(1)
    }).pipe(Effect.provide(parentLayer(file)))
  })

  it.live("5: two processes plan different inputs under one key: one plan, the other InvalidInput", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      const outcomes = yield* race(file, ["plan", "k", "{\"a\":1}"], ["plan", "k", "{\"a\":2}"])
      expect(outcomes.filter((o) => o.ok !== undefined)).toHaveLength(1)
      expect(outcomes.find((o) => o.error !== undefined)!.error).toMatchObject({
        _tag: "InvalidInput",
        issue: "idempotency key k was used for another plan"
      })
      expect(yield* countRows("control_plans")).toBe(1)
      expect(yield* countRows("control_tokens")).toBe(1)
    }).pipe(Effect.provide(parentLayer(file)))
  })

  it.live("16: two processes resolve one approval: exactly one decision lands", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      const rt = yield* ControlRuntime.ControlRuntime
      const { card } = yield* rt.plan({ flowId: "F", input: { a: 1 } })
      const outcomes = yield* race(file, ["resolve", card.planId, "approved"], ["resolve", card.planId, "denied"])
      const winner = outcomes.findIndex((o) => o.error === undefined)
      expect(winner).toBeGreaterThanOrEqual(0)
      expect(outcomes[1 - winner]!.error).toMatchObject({ _tag: "AlreadyResolved", requestId: card.planId })
      expect(yield* Effect.flip(rt.lookupApproval(card.approval.target))).toMatchObject({ _tag: "AlreadyResolved" })
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ resolved: number; decision_json: string }>`SELECT resolved, decision_json FROM control_tokens`
      expect(Number(row!.resolved)).toBe(1)
      expect(JSON.parse(row!.decision_json)._tag).toBe(winner === 0 ? "Approved" : "Denied")
      expect((yield* rt.getPlan(card.planId)).decision).toBe(winner === 0 ? "approved" : "denied")
    }).pipe(Effect.provide(parentLayer(file)))
  })

  it.live("25: two processes resume one parked run: one claims, the other loses", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      const rt = yield* ControlRuntime.ControlRuntime
      yield* launchF()
      yield* rt.releasePending("run-1", yield* rt.claimFence("run-1"))
      const outcomes = yield* race(file, ["resume", "run-1"], ["resume", "run-1"])
      const winners = outcomes.filter((o) => o.ok !== undefined)
      expect(winners).toHaveLength(1)
      expect(outcomes.find((o) => o.error !== undefined)!.error).toMatchObject({ _tag: "ClaimLost" })
      const [summary, fence] = winners[0]!.ok as [RunSummary, string]
      expect(summary.ownerId).toBe(fence)
      const store = yield* RunStore.RunStore
      expect((yield* store.get("run-1")).owner).toEqual(JSON.parse(fence))
      expect(yield* Effect.flip(rt.claimFence("run-1"))).toMatchObject({ _tag: "ClaimLost" })
    }).pipe(Effect.provide(parentLayer(file)))
  })

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
  })

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
  })

  it.live("listing 10,000 runs with each filter while another process inserts: no row skipped or repeated", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      const rt = yield* ControlRuntime.ControlRuntime
      yield* insertEngineRows([{ runId: "p0", status: "suspended", createdAtMs: 0 }])
      for (let batch = 0; batch < 10; batch++) {
        yield* insertEngineRows(Array.from({ length: 980 }, (_, j) => {
          const i = batch * 980 + j
          const status = (["pending", "suspended", "completed", "failed", "cancelled"] as const)[i % 5]!
          const waits = i % 97 === 0 && status === "suspended"
          return {
            runId: `e${i}`,
            flowName: i % 3 === 0 ? "even" : "odd",
            status,
            createdAtMs: i,
            ...(i % 4 === 0 ? { parentRunId: "p0" } : {}),
            ...(i % 7 === 0 ? { lineageId: "L", roundOrdinal: i } : {}),
            ...(waits ? { waitingReason: "approval", waitingToken: `tok-${i}` } : {})
          }
        }))
      }
      for (let i = 0; i < 199; i++) yield* launchF({ i })
      expect(yield* countRows("flows_runs")).toBe(10_000)
      const filters: ReadonlyArray<readonly [ControlRuntime.RunFilters, (s: RunSummary) => boolean]> = [
        [{}, () => true],
        [{ flowId: "even" }, (s) => s.flowId === "even"],
        [{ status: "waiting-approval" }, (s) => s.status === "waiting-approval"],
        [{ status: "accepted" }, (s) => s.status === "accepted"],
        [{ terminal: true }, (s) => isTerminalStatus(s.status)],
        [{ terminal: false }, (s) => !isTerminalStatus(s.status)],
        [{ parentRunId: "p0" }, (s) => s.parentRunId === "p0"],
        [{ lineageId: "L" }, (s) => s.lineageId === "L"],
        [{ since: 1000, until: 3000 }, (s) => s.createdAt >= 1000 && s.createdAt < 3000],
        [{ launchedBy: { id: "local" } }, (s) => s.launchedBy?.id === "local"]
      ]
      const walk = (filter: ControlRuntime.RunFilters, order: "oldest" | "newest", check: (s: RunSummary) => boolean) =>
        Effect.gen(function*() {
          const seen: Array<string> = []
          let cursor: ControlRuntime.RunCursor | undefined
          for (;;) {
            const page = yield* rt.queryRuns({ filters: filter, order, limit: 500, ...(cursor === undefined ? {} : { cursor }) })
            for (const item of page.items) {
              if (!check(item)) throw new Error(`${JSON.stringify(filter)} returned ${JSON.stringify(item)}`)
              seen.push(item.runId)
            }
            if (page.nextCursor === undefined) return seen
            cursor = page.nextCursor
          }
        })
      const baseline = new Map<number, Array<string>>()
      for (const [i, [filter, check]] of filters.entries()) {
        const seen = yield* walk(filter, "oldest", check)
        expect(seen.length).toBeGreaterThan(0)
        baseline.set(i, seen)
      }
      expect(baseline.get(0)).toHaveLength(10_000)
      expect(baseline.get(4)!.length + baseline.get(5)!.length).toBe(10_000)
      const inserter = spawnFixture(worker, [file, "insert"])
      const inserted = completion(inserter)
      yield* Effect.promise(() => line(inserter, (v) => v.ready))
      for (const [i, [filter, check]] of filters.entries()) {
        for (const order of i % 3 === 0 ? ["oldest", "newest"] as const : ["oldest"] as const) {
          const seen = yield* walk(filter, order, check)
          expect(new Set(seen).size).toBe(seen.length)
          const present = new Set(seen)
          expect(baseline.get(i)!.filter((id) => !present.has(id))).toEqual([])
          // Pages follow the commit order: row sequences strictly increase (oldest) or decrease (newest).
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ run_id: string; row_seq: number }>`SELECT run_id, row_seq FROM flows_runs`
          const seqOf = new Map(rows.map((r) => [r.run_id, Number(r.row_seq)]))
          const seqs = seen.map((id) => seqOf.get(id)!)
          const ordered = seqs.every((seq, k) => k === 0 || (order === "oldest" ? seq > seqs[k - 1]! : seq < seqs[k - 1]!))
          expect(ordered).toBe(true)
        }
      }
      fs.writeFileSync(`${file}.stop`, "stop")
      const exit = yield* Effect.promise(() => inserted)
      expect(exit.code).toBe(0)
      const count = JSON.parse(exit.stdout.trim().split("\n").at(-1)!).inserted as number
      expect(count).toBeGreaterThan(0)
      expect(yield* countRows("flows_runs")).toBe(10_000 + count)
    }).pipe(Effect.provide(parentLayer(file)))
  }, 300_000)
})
