/**
 * The main job survives the death of its owner (issue 6 must-hold; node.md checks 16 and 17): two worker
 * processes on one SQLite file, a few thousand real files, the owning worker SIGKILLed (or SIGTERMed) at
 * an arbitrary point; the run completes with every file indexed exactly once.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Control from "@baton/control/Control"
import * as IndexDir from "../src/example/IndexDir.js"
import * as Support from "./example-support.js"

const files = 2500

const scenario = async (signal: "SIGKILL" | "SIGTERM") => {
  const root = Support.makeTree(files)
  const expected = Support.independentIndex(root)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-crash-"))
  const db = path.join(dir, "baton.db")
  const trace = path.join(dir, "trace.txt")
  const runtime = Support.clientRuntime(db)
  const workers = [Support.spawnWorker(db, "w1", trace), Support.spawnWorker(db, "w2", trace)]
  try {
    await runtime.runPromise(Effect.void)
    const pids = await Promise.all(workers.map((w) => w.ready))
    const runId = await runtime.runPromise(Support.launch({ root, batchFiles: 100 }))
    // An arbitrary point between 30 % and 70 % of the files committed, then a few files into the next batch.
    const target = Math.floor(files * (0.3 + 0.4 * ((process.pid % 97) / 97)))
    await runtime.runPromise(Support.until(Effect.map(Support.rowCount(runId), (n) => n >= target), 240_000, 20))
    const pid = await runtime.runPromise(Support.ownerPid(runId))
    expect(pid).toBeDefined()
    const victim = workers[pids.indexOf(pid!)]!
    const survivor = workers.find((w) => w !== victim)!
    const killedAt = Date.now()
    victim.child.kill(signal)
    const exitCode = await victim.exited
    await runtime.runPromise(
      Support.until(
        Effect.map(Effect.flatMap(Control.Control, (c) => c.getRun(runId)), (s) => s.status === "completed" || s.status === "failed"),
        240_000,
        200
      )
    )
    const summary = await runtime.runPromise(Effect.flatMap(Control.Control, (c) => c.getRun(runId)))
    expect(summary.status, survivor.output()).toBe("completed")

    // Every file exactly once (the primary key forbids duplicates; the set must be equal), hashes right.
    const indexed = await runtime.runPromise(Support.rows(runId))
    expect(indexed.length).toBe(expected.size)
    expect(new Set(indexed.map((r) => r.path))).toEqual(new Set(expected.keys()))
    for (const row of indexed) {
      expect(row.status).toBe("ok")
      expect(row.sha256).toBe(expected.get(row.path))
    }

    const { own, facts } = await runtime.runPromise(Support.history(runId))
    const survivorPid = await survivor.ready
    const factsOf = (type: string) => facts.filter((f) => f.eventType === type && (f.payload as { owner?: { pid?: number } }).owner?.pid === survivorPid)
    if (signal === "SIGKILL") {
      // Takeover of a dead owner: stolen + activated for the survivor, taken-over in the run's stream.
      expect(exitCode).toBe(null)
      expect(own.some((e) => e.eventType === "baton.run.taken-over")).toBe(true)
      expect(facts.some((f) => f.eventType === "flows.consensus.stolen")).toBe(true)
      expect(factsOf("flows.consensus.activated").length).toBeGreaterThan(0)
      // Redone work: at most the files since the interrupted batch's last checkpoint.
      const { repeated } = Support.rehashed(trace)
      expect(repeated).toBeLessThanOrEqual(IndexDir.checkpointEvery)
      const takeover = own.find((e) => e.eventType === "baton.run.taken-over")!
      console.log(`SIGKILL at ${target} rows; takeover ${((takeover.emittedAtMs - killedAt) / 1000).toFixed(1)} s after the kill; ${repeated} files hashed twice`)
    } else {
      // Graceful: the victim released the run; the survivor picked it up without a takeover.
      expect(own.some((e) => e.eventType === "baton.run.released" && (e.payload as { reason?: string }).reason === "shutdown")).toBe(true)
      expect(own.some((e) => e.eventType === "baton.run.taken-over")).toBe(false)
      expect(factsOf("flows.consensus.activated").length).toBeGreaterThan(0)
      console.log(`SIGTERM at ${target} rows; worker exit ${exitCode}; ${Support.rehashed(trace).repeated} files hashed twice`)
    }
  } finally {
    for (const w of workers) w.child.kill("SIGKILL")
    await runtime.dispose()
  }
}

describe("index-dir under worker death", () => {
  it("SIGKILL of the owning worker: the other worker takes over and every file is indexed once", () => scenario("SIGKILL"), 600_000)
  it("SIGTERM of the owning worker: it releases the run and the other worker finishes it", () => scenario("SIGTERM"), 600_000)
})
