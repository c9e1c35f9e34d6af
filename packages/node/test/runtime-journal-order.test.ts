/**
 * The executor's journal on a real SQLite file (node.md 5.8, journal.md 5.5): lossy
 * `baton.step.started` / `baton.step.checkpoint` get their seq before the durable entry that
 * follows them (the executor flushes the lossy queue first), so `seq` order is the order things
 * happened; `baton.run.completed` counts the run's steps over all its drives; a result that is not
 * JSON fails the run naming the offending path.
 */
import * as AttemptStore from "@baton/run-store/AttemptStore"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Step from "../src/Step.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"
import { awaitStatus, launch } from "./fixtures/runtimeSupport.js"
import { entriesOf, orderScenario, ordered } from "./runtime-journal-order-scenario.js"

/** A handler whose result holds the `undefined` of a void step. */
const voidResult = Flow.make({
  id: "journal-void-result",
  description: "returns a void step's undefined inside its result",
  version: "1",
  input: Schema.Unknown,
  handler: () =>
    Effect.gen(function*() {
      const w = yield* Step.run("write", Effect.void)
      return { ok: true, nested: [{ w }] }
    })
})

/** A step whose result holds a function deep inside. */
const functionStep = Flow.make({
  id: "journal-function-step",
  description: "a step result that is not JSON",
  version: "1",
  input: Schema.Unknown,
  handler: () => Step.run("bad", Effect.succeed({ rows: [{ id: 1 }, { id: 2, at: () => 0 }] }))
})

describe("executor journal", () => {
  it.live("seq order: every step started < its checkpoints < its completed; parked after the step before it; steps counted over drives", () =>
    orderScenario.pipe(Effect.provide(NodeRuntime.layer({
      filename: tempDb().filename,
      flows: [ordered],
      pollInterval: "100 millis"
    }))), 60_000)

  it.live("a result holding undefined fails the run naming the path (result.nested[0].w); so does a step's result", () =>
    Effect.gen(function*() {
      const runId = yield* launch(voidResult.id, null)
      const summary = yield* awaitStatus(runId, ["completed", "failed"])
      expect(summary.status).toBe("failed")
      const attempts = yield* Effect.flatMap(AttemptStore.AttemptStore, (store) => store.list(runId))
      const result = attempts.find((a) => (a.meta as { name?: string }).name === "$result")
      expect(result?.state).toBe("failed")
      expect(result?.error).toEqual({
        tag: "ResultInvalid",
        message: "the run's result is not JSON: result.nested[0].w: undefined is not JSON"
      })
      const failed = (yield* entriesOf(runId)).filter((e) => e.eventType === "baton.run.failed")
      expect(failed.map((e) => e.payload)).toEqual([{ error: result?.error }])
      // The void step itself completed: only the run's result is refused.
      expect(attempts.find((a) => (a.meta as { name?: string }).name === "write")?.state).toBe("completed")
      // A step's result names its path too.
      const step = yield* launch(functionStep.id, null)
      expect((yield* awaitStatus(step, ["completed", "failed"])).status).toBe("failed")
      const stepResult = (yield* Effect.flatMap(AttemptStore.AttemptStore, (store) => store.list(step)))
        .find((a) => (a.meta as { name?: string }).name === "$result")
      expect((stepResult?.error as { message: string }).message).toContain(
        "the result of step bad is not JSON (result.rows[1].at: a function is not JSON)"
      )
    }).pipe(Effect.provide(NodeRuntime.layer({
      filename: tempDb().filename,
      flows: [voidResult, functionStep],
      pollInterval: "100 millis"
    }))), 60_000)
})
