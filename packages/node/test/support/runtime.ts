/** Helpers for runtime tests: plan, approve and launch a run; wait for a status. */
import * as Control from "@baton/control/Control"
import type * as ControlSchema from "@baton/control/ControlSchema"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import { type Duration, Effect, Schedule } from "effect"

let keys = 0
const key = (what: string) => `${what}-${process.pid}-${++keys}`

/** Plan `flowId` with `input`, approve the plan, launch it; answers the run id. */
export const launch = (flowId: string, input: unknown) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const card = yield* control.plan({ flowId, input, idempotencyKey: key("plan") })
    yield* control.approve({ target: card.approval.target, scope: "once", idempotencyKey: key("approve") })
    const receipt = yield* control.run({
      _tag: "Plan",
      planId: card.planId,
      digest: card.digest,
      envelope: card.envelope,
      idempotencyKey: key("launch")
    })
    if (receipt._tag !== "Accepted" || receipt.runId === undefined) {
      return yield* Effect.dieMessage(`launch answered ${JSON.stringify(receipt)}`)
    }
    return receipt.runId
  })

/** Wait for a terminal status and fail with the stored `$result` error unless it is `completed`. */
export const expectCompleted = (runId: string) =>
  Effect.gen(function*() {
    const summary = yield* awaitStatus(runId, ["completed", "failed", "cancelled"])
    if (summary.status !== "completed") {
      const attempts = yield* Effect.flatMap(AttemptStore.AttemptStore, (store) => store.list(runId))
      const result = attempts.find((a) => (a.meta as { name?: string }).name === "$result")
      return yield* Effect.dieMessage(`run ${runId} ended ${summary.status}: ${JSON.stringify(result?.error)}`)
    }
    return summary
  })

/** Poll `getRun` (real time) until the run's status is one of `statuses`. */
export const awaitStatus = (runId: string, statuses: ReadonlyArray<ControlSchema.RunStatus>, timeout: Duration.DurationInput = "30 seconds") =>
  Effect.gen(function*() {
    const runtime = yield* ControlRuntime.ControlRuntime
    return yield* runtime.getRun(runId).pipe(
      Effect.filterOrFail((summary) => statuses.includes(summary.status)),
      Effect.retry(Schedule.spaced("50 millis")),
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () => new Error(`run ${runId} did not reach ${statuses.join("/")}`)
      })
    )
  })
