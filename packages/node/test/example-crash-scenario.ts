/**
 * The main job under worker death (node.md checks 16 and 17, and 29 on PostgreSQL): two worker
 * processes on one database, a few thousand real files, the owning worker SIGKILLed (or SIGTERMed)
 * once 30–70 % of the files are committed; the run completes with every file indexed exactly once.
 */
import * as Control from "@baton/control/Control"
import { expect } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as IndexDir from "../src/example/IndexDir.js"
import * as Support from "./example-support.js"

/** Where the scenario runs: a client runtime on the database and how to start a worker on it. */
export interface Backend {
  readonly runtime: ReturnType<typeof Support.clientRuntime>
  readonly spawn: (label: string, trace: string) => Support.WorkerProcess
}

export const files = 2500

/** Runs the scenario; answers the run id (the run completed and every check passed). */
export const crashScenario = async (signal: "SIGKILL" | "SIGTERM", backend: Backend): Promise<string> => {
  const root = Support.makeTree(files)
  const expected = Support.independentIndex(root)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-crash-"))
  const trace = path.join(dir, "trace.txt")
  const { runtime } = backend
  const workers = [backend.spawn("w1", trace), backend.spawn("w2", trace)]
  try {
    await runtime.runPromise(Effect.void)
    const pids = await Promise.all(workers.map((w) => w.ready))
    const runId = await runtime.runPromise(Support.launch({ root, batchFiles: 100 }))
    // An arbitrary point between 30 % and 70 % of the files committed, then a few files into the next batch.
    const target = Math.floor(files * (0.3 + 0.4 * ((process.pid % 97) / 97)))
    await runtime.runPromise(Support.until(Effect.map(Support.rowCount(runId), (n) => n >= target), 240_000, 20))
    // Rows commit with a batch's completion: wait until the next batch's attempt is written, so the
    // signal lands inside a step (a kill between two steps leaves no attempt to abandon).
    await runtime.runPromise(Support.until(Support.stepRunning(runId), 60_000, 5))
    const pid = await runtime.runPromise(Support.ownerPid(runId))
    expect(pid).toBeDefined()
    const victim = workers[pids.indexOf(pid!)]!
    const survivor = workers.find((w) => w !== victim)!
    const killedAt = Date.now()
    victim.child.kill(signal)
    const exitCode = await victim.exited
    const exitedAt = Date.now()
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

    const { facts, own } = await runtime.runPromise(Support.history(runId))
    const survivorPid = await survivor.ready
    const factsOf = (type: string) => facts.filter((f) => f.eventType === type && (f.payload as { owner?: { pid?: number } }).owner?.pid === survivorPid)
    const activatedAt = factsOf("flows.consensus.activated")[0]?.emittedAtMs
    if (signal === "SIGKILL") {
      // Takeover of a dead owner: stolen + activated for the survivor, taken-over in the run's stream.
      expect(exitCode).toBe(null)
      expect(own.some((e) => e.eventType === "baton.run.taken-over")).toBe(true)
      expect(factsOf("flows.consensus.stolen").length).toBeGreaterThan(0)
      expect(activatedAt).toBeDefined()
      // Redone work: at most the files since the interrupted batch's last checkpoint.
      const { repeated } = Support.rehashed(trace)
      expect(repeated).toBeLessThanOrEqual(IndexDir.checkpointEvery)
      const takeover = own.find((e) => e.eventType === "baton.run.taken-over")!
      console.log(`SIGKILL at ${target} rows; takeover ${((takeover.emittedAtMs - killedAt) / 1000).toFixed(1)} s after the kill (activated ${((activatedAt! - killedAt) / 1000).toFixed(1)} s); ${repeated} files hashed twice`)
    } else {
      // Graceful: the victim exited 0 (before its watchdog), released the run; the survivor picked it up without a takeover.
      expect(exitCode).toBe(0)
      const released = own.find((e) => e.eventType === "baton.run.released")
      expect(released?.payload).toMatchObject({ reason: "shutdown", drive: 1 })
      expect(own.some((e) => e.eventType === "baton.run.taken-over")).toBe(false)
      expect(activatedAt).toBeDefined()
      console.log(`SIGTERM at ${target} rows; worker exit ${exitCode} after ${((exitedAt - killedAt) / 1000).toFixed(1)} s; survivor activated ${((activatedAt! - released!.emittedAtMs) / 1000).toFixed(1)} s after the release; ${Support.rehashed(trace).repeated} files hashed twice`)
    }
    return runId
  } finally {
    for (const w of workers) w.child.kill("SIGKILL")
  }
}
