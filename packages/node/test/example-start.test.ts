/**
 * node.md checks 1 and 18: `pnpm start -- --yes` over the default directory (effect's dist) indexes
 * every regular file with correct hashes; `--crash-demo --yes` kills the owner, counts down, shows the
 * takeover and a summary with one takeover and one checkpoint resume.
 */
import { describe, expect, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { defaultDirectory } from "../src/internal/exampleArgs.js"
import { tempDir } from "./cli-support.js"
import * as Support from "./example-support.js"

const startScript = fileURLToPath(new URL("../../../scripts/start.ts", import.meta.url))

describe("pnpm start", () => {
  it("--yes over the default directory indexes every file once with correct hashes", async () => {
    const db = path.join(tempDir(), "baton.db")
    const result = await completion(spawnFixture(startScript, ["--", "--yes", "--json", "--db", db]))
    expect(result.code, result.stderr).toBe(0)
    const summary = JSON.parse(result.stdout.trim().split("\n").at(-1)!) as { runId: string; status: string; files: number; root: string }
    expect(summary.status).toBe("completed")
    const root = defaultDirectory()
    expect(summary.root).toBe(root)
    const expected = Support.independentIndex(root)
    expect(summary.files).toBe(expected.size)
    const runtime = Support.clientRuntime(db)
    try {
      const rows = await runtime.runPromise(Support.rows(summary.runId))
      expect(rows.length).toBe(expected.size)
      expect(new Set(rows.map((r) => r.path))).toEqual(new Set(expected.keys()))
      // Three sampled hashes against an independent SHA-256 of the file.
      for (const row of [rows[0]!, rows[Math.floor(rows.length / 2)]!, rows[rows.length - 1]!]) {
        const digest = createHash("sha256").update(fs.readFileSync(path.join(root, row.path))).digest("hex")
        expect(row.sha256).toBe(digest)
      }
      // Every row's hash, for good measure.
      for (const row of rows) expect(row.sha256).toBe(expected.get(row.path))
    } finally {
      await runtime.dispose()
    }
  }, 300_000)

  it("--crash-demo --yes: kill, countdown, takeover, summary with takeovers 1 and resumed from checkpoint 1", async () => {
    const root = Support.makeTree(1200)
    const db = path.join(tempDir(), "baton.db")
    const result = await completion(spawnFixture(startScript, ["--", root, "--crash-demo", "--yes", "--db", db]))
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toMatch(/crash demo: SIGKILL w\d \(pid \d+\) while it owns run-1/)
    expect(result.stdout).toMatch(/lease of w\d \(pid \d+\) goes stale in \d+ s/)
    expect(result.stdout).toMatch(/w\d \(pid \d+\) took over run-1 from w\d \(pid \d+\)/)
    expect(result.stdout).toMatch(/^takeovers\s+1 /m)
    // One recovery time, labelled the same in the event and the summary; the lease's age is labelled apart.
    const event = /took over run-1 from w\d \(pid \d+\) \((\d+\.\d s) after the kill; lease (\d+\.\d s) without a heartbeat\)/.exec(result.stdout)
    expect(event, result.stdout).not.toBeNull()
    expect(result.stdout).toMatch(new RegExp(`^takeovers\\s+1 \\(recovered ${event![1]} after the kill\\)$`, "m"))
    expect(result.stdout).toMatch(/^resumed from checkpoint\s+1$/m)
    expect(result.stdout).toMatch(/^files\s+1,200$/m)
    const runtime = Support.clientRuntime(db)
    try {
      expect((await runtime.runPromise(Support.rows("run-1"))).length).toBe(1200)
      const { own } = await runtime.runPromise(Support.history("run-1"))
      expect(own.filter((e) => e.eventType === "baton.run.taken-over").length).toBe(1)
    } finally {
      await runtime.dispose()
    }
  }, 300_000)
})
