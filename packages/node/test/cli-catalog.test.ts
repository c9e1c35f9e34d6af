/**
 * A CLI catalog that lacks a run's flow does not know that run's code, which is not drift (node.md 6.1:
 * the catalog serves `plan`; drift checks are left to hosts): approving a run's request and resuming it
 * (with or without --allow-code-drift) work with another application's catalog.
 */
import { describe, expect, it } from "@effect/vitest"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { baton, configModule, runVerbs, startWaitHost, tempDir } from "./cli-support.js"

const waitConfig = fileURLToPath(new URL("./fixtures/cli-wait-config.ts", import.meta.url))

const waitUntil = async (check: () => Promise<boolean>) => {
  while (!(await check())) await new Promise((r) => setTimeout(r, 200))
}


describe("cli with a catalog that lacks the run's flow", () => {
  it("approve of a run's request, resume and resume --allow-code-drift succeed; plan still needs the flow", async () => {
    const db = path.join(tempDir(), "baton.db")
    const own = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", waitConfig)
    // The example's catalog (index-dir): it knows nothing of the waiting flows.
    const other = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", configModule)
    const { launch, status } = runVerbs(own)
    let { done, host } = await startWaitHost(db)
    try {
      const r1 = await launch("wait-approval", "plan-1")
      await waitUntil(async () => (await status(r1)).status === "waiting-approval")
      const approved = await other("approve", `${r1}:deploy`)
      expect(approved.code, approved.stderr).toBe(0)
      expect(approved.stdout).toContain(`a host will resume ${r1}`)
      await waitUntil(async () => (await status(r1)).status === "completed")

      const r2 = await launch("wait-signal", "plan-2")
      await waitUntil(async () => (await status(r2)).status === "parked")
      // The host goes away: the parked run waits for a resume.
      host.kill("SIGTERM")
      await done
      const resumed = await other("resume", r2)
      expect(resumed.code, resumed.stderr).toBe(0)
      expect(resumed.stderr).toBe("")
      const again = await other("resume", r2, "--allow-code-drift")
      expect(again.code, again.stderr).toBe(0)
      expect(again.stderr).toBe("")
      expect(again.stdout).toContain("--allow-code-drift: no loaded catalog has the run's flow, so no code was adopted")
      ;({ done, host } = await startWaitHost(db))
      expect((await other("signal", r2, "go", '{"n":2}')).code).toBe(0)
      await waitUntil(async () => (await status(r2)).status === "completed")

      const plan = await other("plan", "wait-approval", "--input", "{}")
      expect(plan.code).toBe(2)
      expect(plan.stderr).toBe(`baton: flow "wait-approval" is not registered here (known: index-dir)\n`)
    } finally {
      host.kill("SIGTERM")
      await done
    }
  }, 180_000)

  it("baton run of a live run whose flow the catalog lacks shows no code drift", async () => {
    const db = path.join(tempDir(), "baton.db")
    const own = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", waitConfig)
    const other = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", configModule)
    const { launch, status } = runVerbs(own)
    const { done, host } = await startWaitHost(db)
    try {
      const runId = await launch("wait-signal", "plan-1")
      await waitUntil(async () => (await status(runId)).status === "parked")
      const shown = await other("run", runId)
      expect(shown.code, shown.stderr).toBe(0)
      expect(shown.stdout).toMatch(/^status\s+parked/m)
      expect(shown.stdout).not.toContain("code drift")
      const json = JSON.parse((await other("run", runId, "--json")).stdout) as { codeDrift?: unknown }
      expect(json.codeDrift).toBeUndefined()
    } finally {
      host.kill("SIGTERM")
      await done
    }
  }, 120_000)
})
