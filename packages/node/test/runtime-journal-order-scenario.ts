/**
 * The executor journal-order scenario shared by the SQLite and PostgreSQL tests (node.md 5.8,
 * journal.md 5.5): eight checkpointed steps around a signal wait; seq order must be the order
 * things happened, and `baton.run.completed` must count all eight steps.
 */
import * as Control from "@baton/control/Control"
import * as Journal from "@baton/journal/Journal"
import type * as JournalEvent from "@baton/journal/JournalEvent"
import { expect } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as Step from "../src/Step.js"
import { awaitStatus, expectCompleted, launch } from "./fixtures/runtimeSupport.js"

export const entriesOf = (runId: string) =>
  Effect.flatMap(Journal.Journal, (journal) => journal.entries({ runId: runId as never, limit: 1000 })).pipe(
    Effect.map((page) => page.entries)
  )

/** A step that records two checkpoints before it returns `n`. */
const checkpointed = (name: string, n: number) =>
  Step.run(
    name,
    Effect.gen(function*() {
      yield* Step.checkpoint({ n, at: 1 })
      yield* Step.checkpoint({ n, at: 2 })
      return n
    })
  )

const before = ["a1", "a2", "a3"]
const after = ["b1", "b2", "b3", "b4", "b5"]

/** Eight checkpointed steps around a signal wait: the first drive runs three and parks. */
export const ordered = Flow.make({
  id: "journal-order",
  description: "steps with checkpoints around a wait",
  version: "1",
  input: Schema.Unknown,
  handler: () =>
    Effect.gen(function*() {
      let sum = 0
      for (const [i, name] of before.entries()) sum += yield* checkpointed(name, i)
      const got = yield* Step.waitForSignal("go")
      for (const [i, name] of after.entries()) sum += yield* checkpointed(name, i)
      return { sum, got }
    })
})

const payloadOf = (entry: JournalEvent.Entry) => entry.payload as { step?: string; attempt?: number; name?: string }

/**
 * Launch `ordered`, park it, signal it, and check the journal's seq order and the completed
 * payload. Needs a host serving `ordered` in context.
 */
export const orderScenario = Effect.gen(function*() {
  const control = yield* Control.Control
  const runId = yield* launch(ordered.id, null)
  yield* awaitStatus(runId, ["parked"])
  yield* control.signal({ runId, signal: { name: "go", payload: { n: 1 } }, idempotencyKey: `order-go-${runId}` })
  yield* expectCompleted(runId)
  const entries = yield* entriesOf(runId)
  const seqs = entries.map((e) => e.seq)
  expect(seqs).toEqual([...seqs].sort((x, y) => x - y))
  const seqOf = (type: string, step?: string) =>
    entries.filter((e) => e.eventType === type && (step === undefined || payloadOf(e).step === step)).map((e) => e.seq)

  for (const step of [...before, ...after]) {
    const started = seqOf("baton.step.started", step)
    const checkpoints = seqOf("baton.step.checkpoint", step)
    const completed = seqOf("baton.step.completed", step)
    expect({ step, started: started.length, checkpoints: checkpoints.length, completed: completed.length })
      .toEqual({ step, started: 1, checkpoints: 2, completed: 1 })
    expect(started[0]!).toBeLessThan(checkpoints[0]!)
    expect(checkpoints[0]!).toBeLessThan(checkpoints[1]!)
    expect(checkpoints[1]!).toBeLessThan(completed[0]!)
  }
  // The first drive: a1..a3 in order, then the park; the second drive runs b1..b5 after it.
  const parked = seqOf("baton.run.parked")
  expect(parked).toHaveLength(1)
  expect(seqOf("baton.step.completed", "a3")[0]!).toBeLessThan(parked[0]!)
  expect(seqOf("baton.step.started", "a3")[0]!).toBeLessThan(parked[0]!)
  expect(parked[0]!).toBeLessThan(seqOf("baton.step.started", "b1")[0]!)
  const driven = seqOf("baton.run.driven")
  expect(driven).toHaveLength(2)
  expect(driven[1]!).toBeGreaterThan(parked[0]!)
  // Per-step order overall: the steps' starts follow the handler's order.
  expect(
    entries.filter((e) => e.eventType === "baton.step.started").map((e) => payloadOf(e).step)
  ).toEqual([...before, ...after])

  // spec 5.8 { steps, resultBytes }: all eight steps of the run, not the five of the last drive.
  const completedEntry = entries.filter((e) => e.eventType === "baton.run.completed")
  expect(completedEntry).toHaveLength(1)
  expect(completedEntry[0]!.seq).toBe(seqs[seqs.length - 1])
  expect(completedEntry[0]!.payload).toEqual({
    steps: 8,
    resultBytes: JSON.stringify({ sum: 13, got: { n: 1 } }).length
  })
})
