/**
 * node.md checks 8 and 9 through the CLI: `baton approve run-N:deploy` resumes a run waiting for
 * approval, `baton deny … --reason no --as bob` fails it with the decision recorded, and `baton signal`
 * delivers a payload to a parked run.
 */
import { describe, expect, it } from "@effect/vitest"
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

describe("cli approve, deny and signal against a live host", () => {
  it("approves, denies with a reason and principal, and signals parked runs", async () => {
    const db = path.join(tempDir(), "baton.db")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", config)
    // The CLI creates nothing: a first mutating verb with the catalog initialises the file… once it exists.
    const { done, host } = await startWaitHost(db)
    try {
      const { launch, status } = runVerbs(cli)

      // Approve a run's request.
      const r1 = await launch("wait-approval", "plan-1")
      await waitUntil(async () => (await status(r1)).status === "waiting-approval")
      const waiting = await cli("runs", "--status", "waiting-approval")
      expect(waiting.stdout).toContain(r1)
      expect(waiting.stdout).toContain("approval:deploy")
      // `baton run` lists the open wait; its time column is the waiting run's creation time.
      const shownWaiting = await cli("run", r1)
      expect(shownWaiting.stdout).toMatch(/REASON\s+NAME\s+RUN\s+RUN CREATED\s+REQUEST/)
      expect(shownWaiting.stdout).toMatch(/approval\s+deploy\s+/)
      const approved = await cli("approve", `${r1}:deploy`, "--reason", "ship it")
      expect(approved.code, approved.stderr).toBe(0)
      expect(approved.stdout).toContain(`a host will resume ${r1}`)
      await waitUntil(async () => (await status(r1)).status === "completed")

      // Deny another run's request, with a reason, as bob.
      const r2 = await launch("wait-approval", "plan-2")
      await waitUntil(async () => (await status(r2)).status === "waiting-approval")
      const denied = await cli("deny", `${r2}:deploy`, "--reason", "no", "--as", "bob")
      expect(denied.code, denied.stderr).toBe(0)
      await waitUntil(async () => (await status(r2)).status === "failed")
      const shown = await cli("run", r2)
      expect(shown.stdout).toMatch(/error\s+.*bob/)
      const journal = JSON.parse((await cli("journal", r2, "--json")).stdout) as Array<{ eventType: string; payload: any }>
      const denial = journal.find((e) => e.eventType === "control.approval.denied")
      expect(denial?.payload.reason).toBe("no")
      expect(denial?.payload.principal.id).toBe("bob")
      // Deciding again once the run has ended is refused by its state.
      const again = await cli("deny", `${r2}:deploy`, "--reason", "changed my mind", "--as", "bob")
      expect(again.code).toBe(4)
      expect(again.stderr).toContain(`${r2} is already failed`)

      // Signal a parked run.
      const r3 = await launch("wait-signal", "plan-3")
      await waitUntil(async () => (await status(r3)).status === "parked")
      expect((await cli("runs", "--status", "parked")).stdout).toContain("event:go")
      const signalled = await cli("signal", r3, "go", '{"n":1}')
      expect(signalled.code, signalled.stderr).toBe(0)
      await waitUntil(async () => (await status(r3)).status === "completed")
      expect((await cli("run", r3)).stdout).toMatch(/result\s+\{"n":1\}/)
    } finally {
      host.kill("SIGTERM")
      await done
    }
  }, 240_000)
})
