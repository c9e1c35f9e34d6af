/**
 * `baton journal --follow` ends with the run's outcome as its exit code: 0 completed, 7 failed,
 * 8 cancelled (the CLI's own failure codes stay 1–6).
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { baton, runVerbs, startWaitHost, tempDir } from "./cli-support.js"

const config = fileURLToPath(new URL("./fixtures/cli-wait-config.ts", import.meta.url))

describe("cli journal --follow exit code", () => {
  it("journal --follow exits 8 for a cancelled run and 0 without --follow", async () => {
    const db = path.join(tempDir(), "baton.db")
    fs.writeFileSync(db, "")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", config)
    const runId = await runVerbs(cli).launch("wait-approval", "plan-1")
    expect((await cli("cancel", runId)).stdout).toBe("cancelled\n")
    const followed = await cli("journal", runId, "--follow")
    expect(followed.code, followed.stderr).toBe(8)
    expect(followed.stdout).toContain("control.run.accepted")
    expect((await cli("journal", runId, "--follow", "--json")).code).toBe(8)
    expect((await cli("journal", runId)).code).toBe(0)
  }, 60_000)

  it("journal --follow exits 7 for a run that failed and 0 for one that completed", async () => {
    const db = path.join(tempDir(), "baton.db")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", config)
    const { done, host } = await startWaitHost(db)
    try {
      const { launch } = runVerbs(cli)
      const failed = await launch("fail-now", "plan-1")
      const followFailed = await cli("journal", failed, "--follow")
      expect(followFailed.code, followFailed.stderr).toBe(7)
      expect(followFailed.stdout).toContain("baton.run.failed")

      const completed = await launch("wait-signal", "plan-2")
      expect((await cli("signal", completed, "go", "{}")).code).toBe(0)
      const followCompleted = await cli("journal", completed, "--follow")
      expect(followCompleted.code, followCompleted.stderr).toBe(0)
      expect(followCompleted.stdout).toContain("baton.run.completed")
    } finally {
      host.kill("SIGTERM")
      await done
    }
  }, 120_000)
})
