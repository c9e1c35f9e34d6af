/**
 * The node implementations of control's executor port: `host` drives runs in this process
 * (steps, waits, heartbeats), `client` drives nothing and leaves runs to hosts.
 *
 * @since 0.1.0
 */
import type * as ControlExecutor from "@baton/control/ControlExecutor"
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import * as ControlError from "@baton/control/ControlError"
import { Clock, Effect } from "effect"
import { markEnd } from "./internal/executorState.js"
import { deliverSignal } from "./internal/hostSignals.js"
import type { HostCore } from "./internal/hostCore.js"

/**
 * The host executor over a host core (built by `NodeRuntime` in host mode):
 * - `launch`: flow served, capacity free and the run's queue under this host's limit → drive it (cause
 *   `launch`), `accepted`; else `pending`;
 * - `deliverSignal`: bind the command to the open wait, request a resume and, when this host may
 *   take it up, drive it (cause `signal`); `delivered`, `no-match`, `refused` or `unknown`;
 * - `resumeRun`: `resume(runId, { scope: "launched" })` and drive (`resuming`); `ClaimLost` (including a
 *   refusal of the run's queue) or no room under this host's limit for the queue → `unknown`;
 * - `requestCancel`: `RunStore.requestCancel`, first telling a drive here that it ends `cancelled`;
 * - `settleCancelledPark`: nothing (the facade claims and cancels parks);
 * - `wake`: ask this host for a discovery pass (a start committed runs for hosts to claim);
 * - `recordsRunning`: a drive's first transaction sets the run `running`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const host = (core: HostCore): ControlExecutor.Service => ({
  launch: ({ plan, run }) =>
    Effect.gen(function*() {
      if (!core.accepting) return "pending" as const
      const flow = yield* core.flowFor(run.flowId)
      if (flow === undefined || core.capacity() <= 0) return "pending" as const
      const started = yield* core.startDrive(run.runId, run.flowId, "launch", null, undefined, { summary: run, plan })
      return started ? "accepted" as const : "pending" as const
    }),
  deliverSignal: (input) => deliverSignal(core, input),
  resumeRun: ({ runId }) =>
    Effect.gen(function*() {
      if (core.driven.has(runId)) return "resuming" as const
      if (!core.accepting || core.capacity() <= 0) return "unknown" as const
      const summary = yield* core.runtime.getRun(runId)
      const flow = yield* core.flowFor(summary.flowId)
      if (flow === undefined) return "unknown" as const
      const queue = yield* core.queueOf(runId)
      if (!core.queueRoom(queue)) return "unknown" as const
      yield* core.runtime.resume(runId, { scope: "launched" })
      const started = yield* core.startDrive(runId, summary.flowId, "resume", null, queue)
      return started ? "resuming" as const : "unknown" as const
    }).pipe(
      Effect.catchAll((error) =>
        error._tag === "PersistenceError"
          ? Effect.fail(error)
          : Effect.succeed("unknown" as const)
      )
    ),
  requestCancel: ({ runId }) =>
    Effect.gen(function*() {
      const nowMs = yield* Clock.currentTimeMillis
      const outcome = yield* core.runStore.requestCancel(runId, nowMs)
      // A run driven here learns why it is being interrupted before control interrupts it.
      const state = core.driven.get(runId)?.control.state
      if (state !== undefined && outcome._tag !== "NotFound" && outcome._tag !== "Terminal") markEnd(state, "cancelled")
      switch (outcome._tag) {
        case "CancelRequested":
          return "recorded" as const
        case "AlreadyRequested":
          return "already-requested" as const
        case "NotFound":
          return "unknown" as const
        case "Terminal":
          return { _tag: "Terminal" as const, status: outcome.status }
      }
    }).pipe(
      Effect.mapError((error) =>
        new ControlError.PersistenceError({ operation: "request a cancel", message: error.message })
      )
    ),
  settleCancelledPark: () => Effect.void,
  wake: Effect.suspend(() => (core.accepting ? core.wake : Effect.void)),
  // A drive's first transaction writes `running` with its `baton.run.driven` entry.
  recordsRunning: true
})

/**
 * The client executor: launches answer `pending` (the facade releases the run for hosts),
 * signals `unknown` (hosts deliver), and a resume this process just claimed is released again
 * (`releasePending`) so a host drives it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const client = (runtime: ControlRuntime.Service): ControlExecutor.Service => ({
  launch: () => Effect.succeed("pending" as const),
  deliverSignal: () => Effect.succeed("unknown" as const),
  resumeRun: ({ runId }) =>
    runtime.claimFence(runId).pipe(
      Effect.flatMap((fence) => runtime.releasePending(runId, fence)),
      Effect.as("unknown" as const),
      Effect.catchAll((error) =>
        error._tag === "PersistenceError" ? Effect.fail(error) : Effect.succeed("unknown" as const)
      )
    ),
  settleCancelledPark: () => Effect.void
})
