/**
 * Listing 10,000 runs page by page under every filter while another OS process inserts runs (issue must-hold).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import type { RunSummary } from "../src/ControlSchema.js"
import { isTerminalStatus } from "../src/ControlSchema.js"
import { launchF } from "./fixtures/runtimeContract.js"
import { line, parentLayer, tempFile, worker } from "./fixtures/runtimeProcesses.js"
import { countRows, insertEngineRows } from "./fixtures/runtimeRows.js"

describe("SqlControlRuntime listing across processes", () => {
  it.live("listing 10,000 runs with each filter while another process inserts: no row skipped or repeated", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      const rt = yield* ControlRuntime.ControlRuntime
      yield* insertEngineRows([{ runId: "p0", status: "suspended", createdAtMs: 0 }])
      for (let batch = 0; batch < 10; batch++) {
        yield* insertEngineRows(Array.from({ length: 995 }, (_, j) => {
          const i = batch * 995 + j
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
      for (let i = 0; i < 49; i++) yield* launchF({ i })
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
          const seen: Array<RunSummary> = []
          let cursor: ControlRuntime.RunCursor | undefined
          for (;;) {
            const page = yield* rt.queryRuns({ filters: filter, order, limit: 500, ...(cursor === undefined ? {} : { cursor }) })
            for (const item of page.items) {
              if (!check(item)) throw new Error(`${JSON.stringify(filter)} returned ${JSON.stringify(item)}`)
              seen.push(item)
            }
            if (page.nextCursor === undefined) return seen
            cursor = page.nextCursor
          }
        })
      // Expected rows per filter come from the unfiltered projection, so SQL filters must agree with it.
      const everything = yield* walk({}, "oldest", () => true)
      expect(everything).toHaveLength(10_000)
      const baseline = new Map(filters.map(([, check], i) => [i, everything.filter(check).map((s) => s.runId)]))
      for (const ids of baseline.values()) expect(ids.length).toBeGreaterThan(0)
      expect(baseline.get(4)!.length + baseline.get(5)!.length).toBe(10_000)
      const inserter = spawnFixture(worker, [file, "insert"])
      const inserted = completion(inserter)
      yield* Effect.promise(() => line(inserter, (v) => v.ready))
      for (const [i, [filter, check]] of filters.entries()) {
        for (const order of i % 3 === 0 ? ["oldest", "newest"] as const : ["oldest"] as const) {
          const seen = (yield* walk(filter, order, check)).map((s) => s.runId)
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
  }, 400_000)
})
