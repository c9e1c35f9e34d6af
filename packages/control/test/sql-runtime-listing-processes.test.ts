/**
 * Listing 10,000 runs page by page under every filter while another OS process inserts runs (issue must-hold).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { listingBaseline, listingFilters, seedListing, walkPages } from "./fixtures/runtimeListing.js"
import { line, parentLayer, tempFile, worker } from "./fixtures/runtimeProcesses.js"
import { countRows, insertEngineRows } from "./fixtures/runtimeRows.js"

describe("SqlControlRuntime listing across processes", () => {
  it.live("listing 10,000 runs with each filter while another process inserts: no row skipped or repeated", () => {
    const file = tempFile()
    return Effect.gen(function*() {
      yield* seedListing(insertEngineRows)
      // Expected rows per filter come from the unfiltered projection, so SQL filters must agree with it.
      const baseline = listingBaseline(yield* walkPages(listingFilters[0]!, "oldest"))
      const inserter = spawnFixture(worker, [file, "insert"])
      const inserted = completion(inserter)
      yield* Effect.promise(() => line(inserter, (v) => v.ready))
      for (const [i, filter] of listingFilters.entries()) {
        for (const order of i % 3 === 0 ? ["oldest", "newest"] as const : ["oldest"] as const) {
          const seen = (yield* walkPages(filter, order)).map((s) => s.runId)
          expect(new Set(seen).size).toBe(seen.length)
          const present = new Set(seen)
          expect(baseline[i]!.filter((id) => !present.has(id))).toEqual([])
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
