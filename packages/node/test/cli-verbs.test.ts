/**
 * node.md checks 23–27 (and the CLI parts of 9): plan, approve, deny, launch, cancel, resume, signal,
 * runs, plans, run, journal over a real SQLite file, and the write lock held by another process.
 */
import * as ControlSchema from "@baton/control/ControlSchema"
import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { exampleDatabase } from "./cli-support.js"

const setup = exampleDatabase

describe("cli verbs", () => {
  it("plan, approve, launch twice, list, show, journal, cancel, resume", async () => {
    const { root, cli } = await setup()
    const planned = await cli("plan", "index-dir", "--input", JSON.stringify({ root }))
    expect(planned.code, planned.stderr).toBe(0)
    expect(planned.stdout).toContain("plan  ")
    expect(planned.stdout).toContain("next: baton approve plan-1")

    const early = await cli("launch", "plan-1")
    expect(early.code).toBe(4)
    expect(early.stderr).toBe("baton: plan-1 is waiting for approval\nhint: baton approve plan-1\n")

    const approved = await cli("approve", "plan-1", "--reason", "looks fine", "--as", "alice")
    expect(approved.code, approved.stderr).toBe(0)
    expect(approved.stdout).toContain("approved plan-1 (scope run) as alice: looks fine")

    const first = await cli("launch", "plan-1")
    expect(first.code, first.stderr).toBe(0)
    const runId = first.stdout.split("\n")[0]!
    expect(runId).toMatch(/^run-\d+$/)
    const second = await cli("launch", "plan-1")
    expect(second.code).toBe(0)
    expect(second.stdout).toContain(`already launched as ${runId}`)

    const runs = await cli("runs")
    expect(runs.code).toBe(0)
    expect(runs.stdout.split("\n")[0]).toMatch(/^RUN\s+FLOW\s+STATUS\s+OWNER\s+CREATED\s+UPDATED\s+WAITING$/)
    expect(runs.stdout).toContain(`${runId}  index-dir  accepted`)
    const runsJson = await cli("runs", "--json")
    const decoded = Schema.decodeUnknownSync(ControlSchema.ListResponse)(JSON.parse(runsJson.stdout))
    expect(decoded._tag === "runs" && decoded.items.map((r) => r.runId)).toEqual([runId])

    const plans = await cli("plans")
    expect(plans.stdout).toMatch(/plan-1\s+index-dir\s+approved/)

    const shown = await cli("run", runId)
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(/status\s+accepted/)
    const shownJson = JSON.parse((await cli("run", runId, "--json")).stdout)
    expect(Object.keys(shownJson).sort()).toEqual(["attempts", "journal", "summary", "waits"])

    const journal = await cli("journal", runId, "--json")
    const entries = JSON.parse(journal.stdout) as Array<{ eventType: string }>
    expect(entries.some((e) => e.eventType === "control.run.accepted")).toBe(true)

    const noRequest = await cli("approve", `${runId}:deploy`)
    expect(noRequest.code).toBe(3)
    expect(noRequest.stderr).toContain(`${runId} has no open approval request "deploy"`)

    const badSignal = await cli("signal", runId, "go", "{bad")
    expect(badSignal.code).toBe(2)
    expect(badSignal.stderr).toContain("signal payload is not valid JSON")

    const cancelled = await cli("cancel", runId, "--reason", "stop", "--as", "carol")
    expect(cancelled.code, cancelled.stderr).toBe(0)
    const again = await cli("cancel", runId)
    expect(again).toMatchObject({ code: 0, stdout: "cancelled\n" })
    const after = JSON.parse((await cli("run", runId, "--json")).stdout) as { summary: ControlSchema.RunSummary }
    expect(after.summary.status).toBe("cancelled")
    expect(after.summary.cancellation).toMatchObject({ source: "control", reason: "stop", principal: { id: "carol" } })
    const resumed = await cli("resume", runId)
    expect(resumed.code).toBe(4)
    expect(resumed.stderr).toContain(`${runId} is already cancelled`)
  })

  it("a denied plan: deny with a reason, approving it later and launching it are refused (exit 4)", async () => {
    const { root, cli } = await setup()
    expect((await cli("plan", "index-dir", "--input", JSON.stringify({ root }))).code).toBe(0)
    const denied = await cli("deny", "plan-1", "--reason", "no", "--as", "bob")
    expect(denied.code, denied.stderr).toBe(0)
    expect(denied.stdout).toContain("denied plan-1")
    const approve = await cli("approve", "plan-1", "--as", "alice")
    expect(approve.code).toBe(4)
    const launch = await cli("launch", "plan-1")
    expect(launch.code).toBe(4)
    const plans = JSON.parse((await cli("plans", "--json")).stdout) as { items: Array<{ decision: string }> }
    expect(plans.items.map((p) => p.decision)).toEqual(["denied"])
  })

  it("runs --all follows cursors and prints each run once", async () => {
    const { root, cli } = await setup()
    for (let i = 1; i <= 5; i++) {
      expect((await cli("plan", "index-dir", "--input", JSON.stringify({ root }))).code).toBe(0)
      expect((await cli("approve", `plan-${i}`)).code).toBe(0)
      expect((await cli("launch", `plan-${i}`)).code).toBe(0)
    }
    const all = await cli("runs", "--limit", "2", "--all", "--json")
    const ids = (JSON.parse(all.stdout) as { items: Array<{ runId: string }> }).items.map((r) => r.runId)
    expect(ids.length).toBe(5)
    expect(new Set(ids).size).toBe(5)
    const page = await cli("runs", "--limit", "2")
    expect(page.stdout).toMatch(/next: --cursor /)
    const oldest = JSON.parse((await cli("runs", "--order", "oldest", "--json")).stdout) as { items: Array<{ runId: string }> }
    expect(oldest.items.map((r) => r.runId)).toEqual([...ids].reverse())
  })

  it("while another process holds the write lock: reads answer, a write gives up after --lock-wait with exit 5", async () => {
    const { root, db, cli } = await setup()
    expect((await cli("plan", "index-dir", "--input", JSON.stringify({ root }))).code).toBe(0)
    expect((await cli("approve", "plan-1")).code).toBe(0)
    const runId = (await cli("launch", "plan-1")).stdout.split("\n")[0]!
    const holder = spawnFixture(new URL("./fixtures/cli-hold-lock.ts", import.meta.url), [db, "12"])
    const done = completion(holder)
    await new Promise<void>((resolve) => {
      let out = ""
      holder.stdout?.on("data", (chunk) => {
        out += String(chunk)
        if (out.includes("locked")) resolve()
      })
    })
    const runs = await cli("runs")
    expect(runs.code, runs.stderr).toBe(0)
    expect((await cli("run", runId)).code).toBe(0)
    const cancel = await cli("cancel", runId, "--lock-wait", "2s")
    expect(cancel.code).toBe(5)
    expect(cancel.stderr).toContain(`${db} is locked by another writer; gave up after 2 s`)
    expect(cancel.stderr).toContain("hint: retry, or raise --lock-wait")
    const status = JSON.parse((await cli("run", runId, "--json")).stdout) as { summary: ControlSchema.RunSummary }
    expect(status.summary.status).toBe("accepted")
    expect((await done).code).toBe(0)
    const retried = await cli("cancel", runId)
    expect(retried.code, retried.stderr).toBe(0)
  }, 120_000)
})
