/**
 * Commit-ordered paging survives SQLite VACUUM (§19 check 46, SQLite half).
 */
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as ControlRuntime from "../src/ControlRuntime.js"
import * as SqlControlRuntime from "../src/SqlControlRuntime.js"
import { insertEngineRows } from "./fixtures/runtimeRows.js"
import { defaultFlows, sqliteFile } from "./fixtures/runtimeSupport.js"

describe("SqlControlRuntime paging on a SQLite file", () => {
  it.effect("46: id and list walks continue across VACUUM without loss or repetition", () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "control-vacuum-")), "baton.db")
    const layer = Layer.provideMerge(
      Layer.orDie(SqlControlRuntime.layer({ flows: defaultFlows })),
      Layer.provideMerge(RunStore.layer, sqliteFile(file))
    )
    return Effect.gen(function*() {
      const rt = yield* ControlRuntime.ControlRuntime
      const sql = yield* SqlClient.SqlClient
      yield* insertEngineRows(Array.from({ length: 30 }, (_, i) => ({ runId: `v${String(i).padStart(2, "0")}`, createdAtMs: i })))
      const ids = yield* rt.pageRunIds({ limit: 10 })
      const list = yield* rt.queryRuns({ limit: 10 })
      expect(ids.ids).toEqual(list.items.map((r) => r.runId))
      // Deleting early rows and vacuuming would renumber an implicit rowid; row_seq is explicit.
      yield* sql`DELETE FROM flows_runs WHERE run_id IN ('v00', 'v01', 'v15')`
      yield* sql`VACUUM`
      yield* insertEngineRows([{ runId: "later", createdAtMs: 99 }])
      const restIds: Array<string> = []
      let after = ids.next
      while (after !== undefined) {
        const page = yield* rt.pageRunIds({ limit: 10, after, through: ids.through })
        restIds.push(...page.ids)
        after = page.next
      }
      const restList: Array<string> = []
      let cursor = list.nextCursor
      while (cursor !== undefined) {
        const page = yield* rt.queryRuns({ limit: 10, cursor })
        restList.push(...page.items.map((r) => r.runId))
        cursor = page.nextCursor
      }
      const expected = Array.from({ length: 20 }, (_, i) => `v${i + 10}`).filter((id) => id !== "v15")
      expect(restIds).toEqual(expected)
      expect(restList).toEqual([...expected, "later"])
    }).pipe(Effect.provide(layer))
  })
})
