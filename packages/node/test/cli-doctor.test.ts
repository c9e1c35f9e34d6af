/**
 * node.md checks 26 and 28: `baton doctor` on a healthy database, a hung owner (SIGSTOPped: FAIL, exit 6,
 * naming the pid; no host on this host takes its run over until the pid is killed), a dead owner (WARN,
 * exit 0), a dropped table (FAIL naming the public read); and `baton journal --follow` printing another
 * process's entries until the run completes. The opt-in `takeOverHungOwnersAfter` is runtime-hung.test.ts.
 */
import * as Control from "@baton/control/Control"
import * as RunStore from "@baton/run-store/RunStore"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { baton, migratedDatabase, tempDir } from "./cli-support.js"
import * as Support from "./example-support.js"
import { stopOutsideWrite } from "./fixtures/sqliteLock.js"

/** How many times `worker` reported claiming `runId` (its `event` lines). */
const claimsOf = (worker: Support.WorkerProcess, runId: string) =>
  worker.output().split("\n").filter((line) => line.startsWith("event ")).map((line) => JSON.parse(line.slice(6)) as { _tag: string; runId?: string })
    .filter((e) => e._tag === "claimed" && e.runId === runId).length

describe("baton doctor", () => {
  it("a dropped flows_attempts table fails the schema check naming AttemptStore.list", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    await migratedDatabase(db)
    const healthy = await baton("doctor", "--db", db)
    expect(healthy.code, healthy.stdout).toBe(0)
    expect(healthy.stdout).toMatch(/^OK\s+schema\s+every public read works$/m)
    const dropped = spawnSync("python3", ["-c", `import sqlite3; c = sqlite3.connect(${JSON.stringify(db)}); c.execute("drop table flows_attempts"); c.commit(); c.close()`])
    expect(dropped.status, String(dropped.stderr)).toBe(0)
    const broken = await baton("doctor", "--db", db)
    expect(broken.code).toBe(6)
    expect(broken.stdout).toMatch(/^FAIL\s+schema\s+AttemptStore\.list fails/m)
    const json = JSON.parse((await baton("doctor", "--db", db, "--json")).stdout) as { ok: boolean; checks: Array<{ check: string; level: string; message: string }> }
    expect(json.ok).toBe(false)
    expect(json.checks.some((c) => c.level === "FAIL" && c.message.includes("AttemptStore.list"))).toBe(true)
  })

  it("a hung owner FAILs naming its pid and a same-host worker leaves its run alone; once killed it WARNs and the worker takes over while journal --follow prints to completion", async () => {
    const root = Support.makeTree(300)
    const dir = fs.mkdtempSync(path.join(tempDir(), "doctor-"))
    const db = path.join(dir, "baton.db")
    const trace = path.join(dir, "trace.txt")
    const runtime = Support.clientRuntime(db)
    const first = Support.spawnWorker(db, "w1", trace)
    let second: Support.WorkerProcess | undefined
    try {
      await runtime.runPromise(Effect.void)
      const pid = await first.ready
      // Drive 1 holds inside batch 2 with its heartbeat running (the crash demo's hold).
      const runId = await runtime.runPromise(Support.launch({ root, batchFiles: 100, holdAt: { batch: 2, files: 10 } }))
      await runtime.runPromise(Support.until(
        Effect.map(Support.history(runId), (h) => h.own.some((e) => e.eventType === "index.held")),
        120_000,
        200
      ))
      const healthy = await baton("doctor", "--db", db)
      expect(healthy.code, healthy.stdout).toBe(0)

      // A second worker on this host runs through the hang; the hung owner's run is not its to take.
      second = Support.spawnWorker(db, "w2", trace)
      await second.ready

      // Hung: the pid is alive but the lease goes stale.
      await stopOutsideWrite(first.child, db)
      let hung = await baton("doctor", "--db", db)
      const deadline = Date.now() + 90_000
      while (hung.code !== 6 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 2_000))
        hung = await baton("doctor", "--db", db)
      }
      expect(hung.code, hung.stdout).toBe(6)
      expect(hung.stdout).toContain(`${runId}: owner pid ${pid} is alive but not heartbeating`)
      expect(hung.stdout).toContain(`hint: kill ${pid}, or start hosts with takeOverHungOwnersAfter`)
      // Stale for doctor, and w2 (polling every second) has swept it several times: still w1's.
      await new Promise((r) => setTimeout(r, 3_500))
      expect(await runtime.runPromise(Support.ownerPid(runId))).toBe(pid)
      expect(claimsOf(second, runId)).toBe(0)

      // Dead: a stale owner whose pid is gone is a warning; a host will take it over. (w2, which
      // owns nothing, is held still meanwhile so the warning is seen before it does.)
      await stopOutsideWrite(second.child, db)
      first.child.kill("SIGKILL")
      await first.exited
      const dead = await baton("doctor", "--db", db)
      expect(dead.code, dead.stdout).toBe(0)
      expect(dead.stdout).toMatch(new RegExp(`^WARN\\s+stuck runs\\s+${runId}: owner .*a host will take it over`, "m"))

      // journal --follow (in this process) while w2 takes the run over and completes it.
      const follow = baton("journal", runId, "--follow", "--db", db)
      second.child.kill("SIGCONT")
      const followed = await follow
      expect(followed.code, followed.stderr).toBe(0)
      expect(followed.stdout).toContain("baton.run.taken-over")
      expect(followed.stdout).toContain("baton.run.completed")
      expect(followed.stdout).toMatch(/^~\d+ .*flows\.consensus\.activated/m)
      const summary = await runtime.runPromise(Effect.flatMap(Control.Control, (c) => c.getRun(runId)))
      expect(summary.status).toBe("completed")
      expect(claimsOf(second, runId)).toBe(1)
      const { own } = await runtime.runPromise(Support.history(runId))
      expect(own.find((e) => e.eventType === "baton.run.taken-over")?.payload).toMatchObject({
        from: { pid },
        evidence: "same-host-pid-dead"
      })
      const indexed = await runtime.runPromise(Support.rows(runId))
      expect(indexed.length).toBe(300)
    } finally {
      first.child.kill("SIGKILL")
      second?.child.kill("SIGCONT")
      second?.child.kill("SIGKILL")
      await runtime.dispose()
    }
  }, 300_000)

  it("an orphaned claim whose claimant is dead: doctor warns, --fix recovers it", async () => {
    const root = Support.makeTree(5)
    const db = path.join(tempDir(), "baton.db")
    const runtime = Support.clientRuntime(db)
    try {
      const runId = await runtime.runPromise(Support.launch({ root }))
      // A pid that is gone: a process that has already exited.
      const gone = Number(spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" }).stdout)
      await runtime.runPromise(Effect.gen(function*() {
        const store = yield* RunStore.RunStore
        const host = yield* NodeRuntime.NodeHost
        const row = yield* store.get(runId)
        const claimant = { hostId: host.identity.hostId, pid: gone, nonce: "n1-x-000000000000.orphan" }
        // Claimed 45 s ago and never activated: its claimant died in between.
        const outcome = yield* store.claim(runId, { status: row.status, owner: row.owner, heartbeatAtMs: row.heartbeatAtMs }, claimant, Date.now() - 45_000)
        expect(outcome._tag).toBe("Claimed")
      }))
      const warned = await baton("doctor", "--db", db)
      expect(warned.code, warned.stdout).toBe(0)
      expect(warned.stdout).toMatch(new RegExp(`^WARN\\s+orphaned claims\\s+${runId}: orphaned claim by \\S+:${gone}`, "m"))
      expect(warned.stdout).toContain("hint: baton doctor --fix")
      const fixed = await baton("doctor", "--fix", "--db", db)
      expect(fixed.code, fixed.stdout).toBe(0)
      expect(fixed.stdout).toMatch(new RegExp(`^OK\\s+orphaned claims\\s+${runId}: recovered the orphaned claim`, "m"))
      const { facts } = await runtime.runPromise(Support.history(runId))
      expect(facts.some((f) => f.eventType === "flows.consensus.expired")).toBe(true)
      const clean = await baton("doctor", "--db", db)
      expect(clean.stdout).toMatch(/^OK\s+orphaned claims\s+none$/m)
    } finally {
      await runtime.dispose()
    }
  }, 120_000)
})
