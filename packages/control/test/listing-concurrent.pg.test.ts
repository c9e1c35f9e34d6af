/**
 * Listing 10,000 runs page by page with each filter on PostgreSQL while another OS process inserts runs
 * (issue must-hold; the SQLite twin is sql-runtime-listing-processes.test.ts): no row skipped or repeated,
 * every page's summaries satisfy the filter, and each walk returns exactly the matching rows that existed
 * when it started plus matching rows the other process committed while it ran — nothing else.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { isDeepStrictEqual } from "node:util"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import type { RunSummary } from "../src/ControlSchema.js"
import { listingBaseline, listingFilters, seedListing, walkPages } from "./fixtures/runtimeListing.js"
import { line } from "./fixtures/runtimeProcesses.js"
import type { EngineRow } from "./fixtures/runtimeRows.js"
import { countRows } from "./fixtures/runtimeRows.js"
import { pgDatabase, sqlRuntime } from "./fixtures/runtimeSupport.js"

const url = TestDatabase.postgresTestUrl("control listing under concurrent inserts")
const inserterFixture = new URL("./fixtures/listingInserter.ts", import.meta.url)

/**
 * Engine-shaped rows in one write and one INSERT: `row_seq` is taken from the sequence per row (as
 * `RunStore.create` does), and the revision triggers fire per row.
 */
const bulkEngineRows = (rows: ReadonlyArray<EngineRow>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter
    const payload = rows.map((row, k) => {
      const status = row.status ?? "pending"
      const terminal = status === "completed" || status === "failed" || status === "cancelled"
      return {
        k: k + 1,
        run_id: row.runId,
        status,
        created_at_ms: row.createdAtMs ?? 0,
        finished_at_ms: terminal ? row.createdAtMs ?? 0 : null,
        parent_run_id: row.parentRunId ?? null,
        lineage_id: row.lineageId ?? null,
        round_ordinal: row.roundOrdinal ?? null,
        waiting_reason: row.waitingReason ?? null,
        waiting_token: row.waitingToken ?? null,
        state_json: JSON.stringify({ flowName: row.flowName ?? "E", ...row.state })
      }
    })
    yield* writer.write(
      // The ordered subquery numbers the batch in payload order, one nextval per row as RunStore.create takes it.
      sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, finished_at_ms, parent_run_id,
          lineage_id, round_ordinal, waiting_reason, waiting_token, state_json)
        SELECT nextval('flows_run_row_seq'), o.run_id, o.status, o.created_at_ms, o.finished_at_ms, o.parent_run_id,
          o.lineage_id, o.round_ordinal, o.waiting_reason, o.waiting_token, o.state_json
        FROM (SELECT x.* FROM jsonb_to_recordset(${JSON.stringify(payload)}::jsonb) AS x(k bigint, run_id text, status text,
          created_at_ms bigint, finished_at_ms bigint, parent_run_id text, lineage_id text, round_ordinal bigint,
          waiting_reason text, waiting_token text, state_json text)
        ORDER BY x.k OFFSET 0) o`
    )
  })

const maxRowSeq = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ m: number | null }>`SELECT MAX(row_seq) AS m FROM flows_runs`
  return Number(rows[0]!.m ?? 0)
})

interface Walk {
  readonly filter: number
  readonly order: "oldest" | "newest"
  /** MAX(row_seq) committed just before the first page was read. */
  readonly startBound: number
  readonly ids: ReadonlyArray<string>
  readonly items: ReadonlyArray<RunSummary>
}

describe.skipIf(url === undefined)("SqlControlRuntime listing on PostgreSQL under another process's inserts", () => {
  it.live("listing 10,000 runs with each filter while another process inserts: no row skipped or repeated", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const schema = (yield* sql<{ s: string }>`SELECT current_schema() AS s`)[0]!.s

      // The SQLite twin's 10,000 rows, the engine rows in 10 bulk writes.
      yield* seedListing(bulkEngineRows)
      // The bulk seed kept the run store's bookkeeping: numbers 1..10,000 and one revision per row.
      const [numbered] = yield* sql<{ n: number; m: number }>`SELECT COUNT(DISTINCT row_seq) AS n, MAX(row_seq) AS m FROM flows_runs`
      expect([Number(numbered!.n), Number(numbered!.m)]).toEqual([10_000, 10_000])
      expect(yield* countRows("flows_run_changes")).toBe(10_000)

      const walk = <E = never, R = never>(index: number, order: "oldest" | "newest", between?: Effect.Effect<void, E, R>) =>
        Effect.gen(function*() {
          const startBound = yield* maxRowSeq
          const items = yield* walkPages(listingFilters[index]!, order, between)
          return { filter: index, order, startBound, ids: items.map((s) => s.runId), items } satisfies Walk
        })

      // Rows per filter at the start come from the unfiltered projection (see listingBaseline).
      const startWalk = yield* walk(0, "oldest")
      const baseline = listingBaseline(startWalk.items)
      const initial = new Set(startWalk.ids)
      const startSummaries = new Map(startWalk.items.map((s) => [s.runId, s]))

      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "control-listing-pg-"))
      const stopFile = path.join(dir, "stop")
      const child = yield* Effect.acquireRelease(
        Effect.sync(() => spawnFixture(inserterFixture, [schema, stopFile])),
        (child) =>
          Effect.promise(async () => {
            // On any exit path the child stops before the schema is dropped.
            if (child.exitCode === null && child.signalCode === null) {
              fs.writeFileSync(stopFile, "stop")
              const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
              const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
              await exited
              clearTimeout(timer)
            }
            fs.rmSync(dir, { recursive: true, force: true })
          })
      )
      const exit = completion(child)
      yield* Effect.promise(() => line(child, (v) => v.ready))

      // Between two pages of a walk, wait until the other process has committed at least one more run,
      // so every walk of more than one page runs across real concurrent inserts.
      const afterAnInsert = Effect.gen(function*() {
        const seen = yield* maxRowSeq
        for (;;) {
          if (child.exitCode !== null) return yield* Effect.dieMessage("the inserter exited during the walks")
          if ((yield* maxRowSeq) > seen) return
          yield* Effect.sleep("5 millis")
        }
      }).pipe(Effect.orDie)

      const walks: Array<Walk> = []
      for (const [i] of listingFilters.entries()) {
        for (const order of ["oldest", "newest"] as const) walks.push(yield* walk(i, order, afterAnInsert))
      }

      fs.writeFileSync(stopFile, "stop")
      const result = yield* Effect.promise(() => exit)
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
      const inserted = new Set(JSON.parse(result.stdout.trim().split("\n").at(-1)!).inserted as Array<string>)
      expect(inserted.size).toBeGreaterThan(0)
      expect(yield* countRows("flows_runs")).toBe(10_000 + inserted.size)

      // The final state (no writer left): every run's summary and commit-ordered key.
      const final = yield* walk(0, "oldest")
      expect(final.ids).toHaveLength(10_000 + inserted.size)
      expect(new Set(final.ids)).toEqual(new Set([...initial, ...inserted]))
      const finalSummaries = new Map(final.items.map((s) => [s.runId, s]))
      // Nobody changed a run that existed at the start, so its summary is the same.
      expect([...initial].filter((id) => !isDeepStrictEqual(finalSummaries.get(id), startSummaries.get(id)))).toEqual([])
      const rows = yield* sql<{ run_id: string; row_seq: number }>`SELECT run_id, row_seq FROM flows_runs`
      const seqOf = new Map(rows.map((r) => [r.run_id, Number(r.row_seq)]))
      const bySeq = [...final.ids].sort((a, b) => seqOf.get(a)! - seqOf.get(b)!)

      let insertedSeen = 0
      for (const w of walks) {
        const [filter, check] = listingFilters[w.filter]!
        const label = `${JSON.stringify(filter)} ${w.order}`
        expect(new Set(w.ids).size, `${label}: repeated rows`).toBe(w.ids.length)
        const present = new Set(w.ids)
        expect(baseline[w.filter]!.filter((id) => !present.has(id)), `${label}: skipped rows that existed at the start`).toEqual([])
        expect(w.ids.filter((id) => !initial.has(id) && !inserted.has(id)), `${label}: rows from nowhere`).toEqual([])
        // Keys are commit-ordered, so every matching row at or below the highest key the walk returned (or
        // below its start) had committed before the page that reached it: exactly those, in key order.
        const bound = Math.max(w.startBound, ...w.ids.map((id) => seqOf.get(id)!))
        const expected = bySeq.filter((id) => seqOf.get(id)! <= bound && check(finalSummaries.get(id)!))
        expect(w.ids, `${label}: not exactly the committed matching rows in key order`)
          .toEqual(w.order === "oldest" ? expected : [...expected].reverse())
        insertedSeen += w.ids.filter((id) => inserted.has(id)).length
      }
      // The unfiltered oldest-first walk always ends on rows committed during it (one between every two pages).
      expect(walks[0]!.ids.some((id) => inserted.has(id))).toBe(true)
      expect(insertedSeen).toBeGreaterThan(0)
    }).pipe(Effect.scoped, Effect.provide(sqlRuntime(pgDatabase(url!)))), 400_000)
})
