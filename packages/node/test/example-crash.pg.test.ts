/**
 * node.md check 29 [pg]: the main job on one PostgreSQL schema (`NodeRuntime.layerPg`) with two
 * worker processes survives the death of its owner as on SQLite (checks 16 and 17, the shared
 * scenario in example-crash-scenario.ts), and `baton runs`, `baton run` and `baton journal` read
 * the finished run from the schema with `--pg`. Fresh schema per test, dropped afterwards.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { baton } from "./cli-support.js"
import { crashScenario } from "./example-crash-scenario.js"
import * as Support from "./example-support.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("node main job on PostgreSQL (check 29)")

const onPg = async (signal: "SIGKILL" | "SIGTERM", after: (runId: string, pg: ReadonlyArray<string>) => Promise<void>) => {
  const schema = `crash_${randomBytes(8).toString("hex")}`
  const runtime = Support.clientRuntimePg(url!, schema)
  try {
    const runId = await crashScenario(signal, { runtime, spawn: (label, trace) => Support.spawnPgWorker(url!, schema, label, trace) })
    await after(runId, ["--pg", url!, "--schema", schema])
  } finally {
    await PgSchema.dropAndDispose(runtime, schema)
  }
}

describe.skipIf(url === undefined)("index-dir on PostgreSQL under worker death", () => {
  it("SIGKILL of the owning worker: the other takes over, every file once; the CLI reads the run with --pg", () =>
    onPg("SIGKILL", async (runId, pg) => {
      const runs = await baton("runs", ...pg)
      expect(runs.code, runs.stderr).toBe(0)
      expect(runs.stdout).toMatch(new RegExp(`^${runId}\\s+index-dir\\s+completed`, "m"))
      const run = await baton("run", runId, ...pg, "--json")
      expect(run.code, run.stderr).toBe(0)
      const shown = JSON.parse(run.stdout) as {
        summary: { runId: string; status: string }
        attempts: Array<{ state: string }>
        journal: Array<{ eventType: string }>
      }
      expect(shown.summary).toMatchObject({ runId, status: "completed" })
      expect(shown.attempts.some((a) => a.state === "abandoned")).toBe(true)
      expect(shown.journal.length).toBeGreaterThan(0)
      const text = await baton("run", runId, ...pg)
      expect(text.code, text.stderr).toBe(0)
      expect(text.stdout).toContain("completed")
      const journal = await baton("journal", runId, ...pg)
      expect(journal.code, journal.stderr).toBe(0)
      expect(journal.stdout).toContain("baton.run.taken-over")
      expect(journal.stdout).toContain("baton.run.completed")
      expect(journal.stdout).toMatch(/^~\d+ .*flows\.consensus\.stolen/m)
    }), 600_000)

  it("SIGTERM of the owning worker: it releases the run and the other finishes it", () =>
    onPg("SIGTERM", async (runId, pg) => {
      const journal = await baton("journal", runId, ...pg, "--type", "baton.run.released")
      expect(journal.code, journal.stderr).toBe(0)
      expect(journal.stdout).toContain("\"reason\":\"shutdown\"")
    }), 600_000)
})
