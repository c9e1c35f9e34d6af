/**
 * A signal the wait's schema refuses is a journal entry written with its `rejected` settlement, and
 * `baton signal --wait` reports the host's verdict: 0 delivered, 4 refused, 9 no verdict within --timeout.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { baton, runVerbs, startWaitHost, tempDir } from "./cli-support.js"

const config = fileURLToPath(new URL("./fixtures/cli-wait-config.ts", import.meta.url))

const waitUntil = async (check: () => Promise<boolean>, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

interface Entry {
  readonly eventType: string
  readonly payload: { readonly commandId?: string; readonly name?: string; readonly reason?: string }
}

describe("cli signal --wait", () => {
  it("a payload the wait's schema refuses is journaled as baton.signal.rejected and signal --wait exits 4; a valid one exits 0", async () => {
    const db = path.join(tempDir(), "baton.db")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", config)
    const { done, host } = await startWaitHost(db)
    try {
      const { launch, status } = runVerbs(cli)
      const runId = await launch("wait-amount", "plan-1")
      await waitUntil(async () => (await status(runId)).status === "parked")

      const refused = await cli("signal", runId, "pay", '{"amount":"marker-7f3a"}', "--wait", "--timeout", "30s")
      expect(refused.code, refused.stdout + refused.stderr).toBe(4)
      expect(refused.stdout).toBe("")
      expect(refused.stderr).toContain(`baton: signal pay was refused by ${runId}: its payload does not match the schema of wait pay`)
      expect(refused.stderr).not.toContain("marker-7f3a")

      const journal = JSON.parse((await cli("journal", runId, "--json", "--type", "baton.signal.rejected")).stdout) as Array<Entry>
      expect(journal).toHaveLength(1)
      expect(journal[0]!.payload).toMatchObject({ name: "pay", reason: "schema" })
      expect(journal[0]!.payload.commandId).toMatch(/^signal:actor:/)
      expect(JSON.stringify(journal[0])).not.toContain("marker-7f3a")

      const refusedJson = await cli("signal", runId, "pay", '{"amount":"x"}', "--wait", "--json")
      expect(refusedJson.code).toBe(4)
      expect(JSON.parse(refusedJson.stdout)).toMatchObject({ error: { code: "signal_rejected", exitCode: 4 } })

      const delivered = await cli("signal", runId, "pay", '{"amount":5}', "--wait")
      expect(delivered.code, delivered.stderr).toBe(0)
      expect(delivered.stdout).toBe(`signal pay delivered to ${runId}\n`)
      await waitUntil(async () => (await status(runId)).status === "completed")
    } finally {
      host.kill("SIGTERM")
      await done
    }
  }, 120_000)

  it("signal --wait with no host to judge it exits 9 after --timeout; --timeout without --wait is usage", async () => {
    const db = path.join(tempDir(), "baton.db")
    fs.writeFileSync(db, "")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", config)
    const runId = await runVerbs(cli).launch("wait-amount", "plan-1")
    const pending = await cli("signal", runId, "pay", '{"amount":1}', "--wait", "--timeout", "300ms")
    expect(pending.code, pending.stderr).toBe(9)
    expect(pending.stderr).toContain(`baton: signal pay has no verdict after 0.3 s: it is still queued for the host that drives ${runId}`)
    const usage = await cli("signal", runId, "pay", '{"amount":1}', "--timeout", "5s")
    expect(usage.code).toBe(2)
    expect(usage.stderr).toContain("--timeout applies to --wait")
    const badTimeout = await cli("signal", runId, "pay", '{"amount":1}', "--wait", "--timeout", "5")
    expect(badTimeout.code).toBe(2)
    expect(badTimeout.stderr).toContain("--timeout expects a number with a unit")
    const queued = await cli("signal", runId, "pay", '{"amount":1}')
    expect(queued.code).toBe(0)
    expect(queued.stdout).toContain("queued for the host that drives")
  }, 60_000)
})
