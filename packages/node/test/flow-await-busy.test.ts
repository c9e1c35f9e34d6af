/**
 * `Flow.await` under contention: a read refused because the pool had no free connection in time is read
 * again, later, instead of failing the await; any other storage failure still fails it.
 */
import * as Control from "@baton/control/Control"
import * as ControlError from "@baton/control/ControlError"
import type * as ControlSchema from "@baton/control/ControlSchema"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Flow from "../src/Flow.js"

const completed: ControlSchema.RunSummary = {
  runId: "run-1",
  flowId: "f",
  status: "completed",
  createdAt: 0,
  updatedAt: 0,
  result: 7
} as ControlSchema.RunSummary

const refusal = (message: string) =>
  new ControlError.PersistenceError({
    operation: "read a run",
    message: "Failed to acquire connection",
    cause: new SqlError({ message: "Failed to acquire connection", cause: new Error(message) })
  })

// Only `getRun` is used by `Flow.await` over a run id in a process without a journal.
const controlAnswering = (answers: Array<Effect.Effect<ControlSchema.RunSummary, ControlError.PersistenceError>>) =>
  Layer.succeed(Control.Control, {
    getRun: () => Effect.suspend(() => answers.length > 1 ? answers.shift()! : answers[0]!)
  } as unknown as Control.Service)

describe("Flow.await under contention", () => {
  it.live("a pool timeout on a read is read again: the await answers the outcome", () =>
    Effect.gen(function*() {
      const busy = Effect.fail(refusal("timeout exceeded when trying to connect"))
      const outcome = yield* Flow.await("run-1", { timeout: "5 seconds" }).pipe(
        Effect.provide(controlAnswering([busy, busy, busy, Effect.succeed(completed)]))
      )
      expect(outcome).toEqual(Flow.Outcome.Completed({ runId: "run-1", value: 7 }))
    }))

  it.live("a read that stays contended is bounded by the await's timeout", () =>
    Effect.gen(function*() {
      const error = yield* Flow.await("run-1", { timeout: "300 millis" }).pipe(
        Effect.provide(controlAnswering([Effect.fail(refusal("timeout exceeded when trying to connect"))])),
        Effect.flip
      )
      expect(error._tag).toBe("AwaitTimeout")
    }))

  it.live("a storage failure that is not contention fails the await", () =>
    Effect.gen(function*() {
      const error = yield* Flow.await("run-1", { timeout: "5 seconds" }).pipe(
        Effect.provide(controlAnswering([Effect.fail(refusal("Connection terminated unexpectedly")), Effect.succeed(completed)])),
        Effect.flip
      )
      expect(error._tag).toBe("PersistenceError")
    }))
})
