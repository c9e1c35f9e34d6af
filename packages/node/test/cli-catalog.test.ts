/**
 * A CLI catalog that lacks a run's flow does not know that run's code, which is not drift (node.md 6.1:
 * the catalog serves `plan`; drift checks are left to hosts): approving a run's request and resuming it
 * (with or without --allow-code-drift) work with another application's catalog.
 */
import { describe, expect, it } from "@effect/vitest"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { baton, configModule, runVerbs, tempDir } from "./cli-support.js"

const waitConfig = fileURLToPath(new URL("./fixtures/cli-wait-config.ts", import.meta.url))

const waitUntil = async (check: () => Promise<boolean>) => {
  while (!(await check())) await new Promise((r) => setTimeout(r, 200))
}

const startHost = async (db: string) => {
  const host = spawnFixture(new URL("./fixtures/cli-wait-host.ts", import.meta.url), [db])
  const done = completion(host)
  await new Promise<void>((resolve, reject) => {
    let out = ""
    host.stdout?.on("data", (chunk) => {
      out += String(chunk)
      if (out.includes("ready")) resolve()
    })
    host.once("exit", (code) => reject(new Error(`host exited ${code}`)))
  })
  return { host, done }
}

describe("cli with a catalog that lacks the run's flow", () => {
  it("approve of a run's request, resume and resume --allow-code-drift succeed; plan still needs the flow", async () => {
    const db = path.join(tempDir(), "baton.db")
    const own = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", waitConfig)
    // The example's catalog (index-dir): it knows nothing of the waiting flows.
    const other = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", configModule)
    const { launch, status } = runVerbs(own)
    let { done, host } = await startHost(db)
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
      expect(again.stdout).toContain("--allow-code-drift: this catalog has no code for the run's flow to adopt")
      ;({ done, host } = await startHost(db))
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
})
