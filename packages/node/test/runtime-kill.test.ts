/**
 * SIGKILL of the owning worker at an arbitrary point of a many-step run (node.md checks 5 and
 * 17 at the runtime level): another worker takes the run over once the lease is stale, every
 * step's application row exists exactly once, the in-flight step resumes from its checkpoint,
 * and the takeover is in the journal.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Companion from "@baton/journal/Companion"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, ManagedRuntime } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { stepDigest } from "../src/internal/executorStep.js"
import { appSet, flows } from "./fixtures/runtimeFlows.js"
import { bodyLines, startWorker, stopAll, tempDb, waitFor, type Worker } from "./fixtures/runtimeProcesses.js"
import { launch } from "./fixtures/runtimeSupport.js"

const workers: Array<Worker> = []
afterAll(() => stopAll(workers))

describe("runtime: SIGKILL of the owner", () => {
  it("another worker takes over; each step's row exactly once; the in-flight step resumes from its checkpoint", async () => {
    const db = tempDb()
    const client = ManagedRuntime.make(
      NodeRuntime.layer({ filename: db.filename, mode: "client", flows, migrations: [appSet] })
    )
    const env = { BATON_TEST_LOG: db.log }
    const w1 = startWorker(db.filename, "w1", env)
    const w2 = startWorker(db.filename, "w2", env)
    workers.push(w1, w2)
    await Promise.all([w1.ready, w2.ready])
    const count = 12
    const runId = await client.runPromise(launch("runtime-test.steps", { count, stepMs: 700, chunks: 7 }))
    const rows = () =>
      client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ step: string; attempt: number; pid: number; resumed: string | null }>`
          SELECT step, attempt, pid, resumed FROM runtime_test_rows WHERE run_id = ${runId}`))
    // An arbitrary point: after 2..6 committed steps, while a later step's body runs.
    const killAfter = 2 + Math.floor(Math.random() * 5)
    const ownerPid = await waitFor("progress", async () => {
      const done = (await rows()).length
      const started = bodyLines(db.log).length
      if (done < killAfter || started <= done) return undefined
      const summary = await client.runPromise(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
      return summary.ownerId === undefined ? undefined : (JSON.parse(summary.ownerId) as { pid: number }).pid
    }, 60_000)
    const victim = [w1, w2].find((w) => w.child.pid === ownerPid)!
    const survivor = victim === w1 ? w2 : w1
    victim.child.kill("SIGKILL")
    await victim.exited
    const summary = await waitFor("completion", async () => {
      const s = await client.runPromise(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
      return s.status === "completed" || s.status === "failed" ? s : undefined
    }, 90_000)
    expect(summary.status).toBe("completed")

    // Each step's application row exactly once.
    const committed = await rows()
    expect(committed.map((r) => r.step).sort()).toEqual(Array.from({ length: count }, (_, i) => `s${i}`).sort())

    // Bodies: steps committed before the kill ran once; the in-flight one ran again elsewhere.
    const bodies = bodyLines(db.log)
    const attempts = await client.runPromise(Effect.flatMap(AttemptStore.AttemptStore, (s) => s.list(runId)))
    const abandoned = attempts.filter((a) => a.state === "abandoned")
    for (const step of abandoned) {
      const name = (step.meta as { name: string }).name
      const next = attempts.find((a) => a.stepKeyDigest === stepDigest(name) && a.attempt === step.attempt + 1)
      expect(next?.state).toBe("completed")
      const rerun = bodies.find((b) => b.step === name && b.attempt === step.attempt + 1)
      expect(rerun?.pid).toBe(survivor.child.pid)
      expect(rerun?.resumeFrom ?? null).toEqual(step.checkpoint ?? null)
      expect(committed.find((r) => r.step === name)?.resumed ?? null).toBe(
        step.checkpoint === undefined ? null : JSON.stringify(step.checkpoint)
      )
    }
    for (const body of bodies) {
      const again = bodies.filter((b) => b.step === body.step)
      expect(again.length).toBeLessThanOrEqual(2)
    }
    // The kill waits for a running body, so one attempt was abandoned, unless that step
    // committed in the instant before the kill (then no body ran twice).
    expect(abandoned.length === 1 || (abandoned.length === 0 && bodies.length === count)).toBe(true)
    expect(bodies.length).toBe(count + abandoned.length)

    // The takeover is in the journal: run stream and ownership facts.
    const journal = await client.runPromise(Effect.flatMap(Journal.Journal, (j) =>
      j.entries({ runId: runId as never, limit: 1000 })))
    const takeover = journal.entries.find((e) => e.eventType === "baton.run.taken-over")
    expect(takeover?.payload).toMatchObject({ from: { pid: ownerPid } })
    const facts = await client.runPromise(
      Companion.entries(Companion.runStore.stream, runId, { limit: 100 })
    )
    const survivorFacts = facts.entries
      .filter((e) => (e.payload as { owner: { pid: number } }).owner.pid === survivor.child.pid)
      .map((e) => e.eventType)
    expect(survivorFacts).toEqual(expect.arrayContaining(["flows.consensus.stolen", "flows.consensus.activated"]))
    await client.dispose()
  }, 180_000)
})
