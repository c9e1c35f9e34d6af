/**
 * Run-lifecycle steps the facade performs after a mutation commits: handing a
 * launched run to the executor, settling a failed launch, reconciling a run
 * the engine settled, relaunching a stranded run, and cancel settlement.
 */
import type * as RunStore from "@baton/run-store/RunStore"
import { Clock, Effect, Option } from "effect"
import type * as ControlError from "../ControlError.js"
import type * as ControlExecutor from "../ControlExecutor.js"
import type * as ControlRuntime from "../ControlRuntime.js"
import * as ControlSchema from "../ControlSchema.js"
import { emit, type Facade, persistence, transact } from "./facadeMutation.js"

export interface Host extends Facade {
  readonly executor: ControlExecutor.Service | undefined
  readonly store: RunStore.Service | undefined
}

export const isTerminal = ControlSchema.isTerminalStatus

/** Someone holds the run: `accepted`/`running` with an owner. */
export const isLive = (summary: ControlSchema.RunSummary): boolean =>
  (summary.status === "accepted" || summary.status === "running") && summary.ownerId !== undefined

export const describe = (cause: unknown): string =>
  typeof cause === "object" && cause !== null && "message" in cause && typeof cause.message === "string"
    ? cause.message
    : String(cause)

const warn = (message: string, runId: string) => (cause: unknown) =>
  Effect.logWarning(message, { runId, cause: describe(cause) })

/** Settles a launch the executor refused: `failed` plus `control.run.failed`, in its own transaction. */
const settleFailedLaunch = (host: Host, runId: string, failure: ControlError.LaunchFailed) =>
  transact(
    host,
    "run.settle-failed-launch",
    Effect.gen(function*() {
      const fence = yield* host.runtime.claimFence(runId)
      const settled = yield* host.runtime.writeStatus(runId, fence, "failed")
      yield* emit(host, runId, "control.run.failed", {
        runId,
        status: settled.status,
        cause: failure.message.slice(0, 4096)
      })
    }),
    runId
  )

/**
 * Hands a launched run to the executor (or declines it with none), after the
 * launch committed. `LaunchFailed` settles the run `failed` and fails the call.
 * With `executorRecordsRunning`, an accepted run gets no hand-off transaction:
 * the executor's first write sets `running` itself.
 */
export const hand = (
  host: Host,
  plan: ControlRuntime.StoredPlan,
  run: ControlSchema.RunSummary,
  options?: { readonly executorRecordsRunning?: boolean }
): Effect.Effect<void, ControlError.LaunchFailed> =>
  Effect.gen(function*() {
    const acceptance = host.executor === undefined
      ? "pending" as const
      : yield* host.executor.launch({ plan, run }).pipe(
        Effect.catchAll((failure) =>
          settleFailedLaunch(host, run.runId, failure).pipe(
            Effect.catchAllCause(warn("could not settle a failed launch", run.runId)),
            Effect.zipRight(Effect.fail(failure))
          )
        )
      )
    if (acceptance === "accepted" && options?.executorRecordsRunning === true) return
    yield* transact(
      host,
      "run.hand",
      Effect.gen(function*() {
        const current = yield* host.runtime.getRun(run.runId)
        // A fast executor may already have moved the run on.
        if (current.status !== "accepted" || current.ownerId === undefined) return
        const fence = yield* host.runtime.claimFence(run.runId)
        if (acceptance === "accepted") {
          const next = yield* host.runtime.writeStatus(run.runId, fence, "running")
          yield* emit(host, run.runId, "control.run.running", { runId: run.runId, status: next.status })
        } else {
          const next = yield* host.runtime.releasePending(run.runId, fence)
          yield* emit(host, run.runId, "control.run.pending", { runId: run.runId, status: next.status })
        }
      }),
      run.runId
    ).pipe(
      Effect.catchAll((error) =>
        error._tag === "ClaimLost" ? Effect.void : warn("could not record a launch hand-off", run.runId)(error)
      )
    )
  })

/**
 * A replayed launch whose run is still `accepted` under another process's
 * owner: take it over (if that owner is gone) and hand it again. Failures are
 * logged; the replay receipt is the answer either way.
 */
export const relaunchStranded = (host: Host, runId: string): Effect.Effect<void> =>
  Effect.gen(function*() {
    const summary = yield* host.runtime.getRun(runId)
    if (summary.status !== "accepted" || summary.ownerId === undefined) return
    const ours = yield* host.runtime.claimFence(runId).pipe(
      Effect.as(true),
      Effect.catchTag("ClaimLost", () => Effect.succeed(false))
    )
    if (ours) return
    const drift = yield* host.runtime.codeDrift(runId)
    if (drift !== undefined) return yield* Effect.logWarning("stranded run not relaunched: code drift", { runId })
    const resumed = yield* host.runtime.resume(runId, { scope: "launched" }).pipe(Effect.option)
    if (Option.isNone(resumed) || resumed.value.status !== "accepted" || resumed.value.planId === undefined) return
    const plan = yield* host.runtime.getPlan(resumed.value.planId)
    yield* hand(host, plan, resumed.value)
  }).pipe(Effect.catchAllCause(warn("stranded relaunch failed", runId)))

/**
 * Brings a run the engine settled to the engine's status: claim (or resume
 * and claim), write the status and journal `control.run.<status>`. Failures
 * are logged: the caller already has the true answer.
 */
export const reconcile = (
  host: Host,
  runId: string,
  status: "completed" | "failed" | "cancelled"
): Effect.Effect<void> =>
  transact(
    host,
    "cancel.reconcile",
    Effect.gen(function*() {
      const current = yield* host.runtime.getRun(runId)
      if (isTerminal(current.status)) return
      const fence = yield* host.runtime.claimFence(runId).pipe(
        Effect.catchTag("ClaimLost", () =>
          host.runtime.resume(runId).pipe(Effect.zipRight(host.runtime.claimFence(runId))))
      )
      const next = yield* host.runtime.writeStatus(runId, fence, status)
      yield* emit(host, runId, `control.run.${next.status}`, { runId, status: next.status })
    }),
    runId
  ).pipe(Effect.catchAllCause(warn("could not reconcile a settled run", runId)))

/** The durable half of a cancel: the executor's `requestCancel`, else the run store's, else unknown. */
export const requestCancel = (host: Host, runId: string): Effect.Effect<ControlExecutor.CancelRecord, ControlError.PersistenceError> => {
  if (host.executor?.requestCancel !== undefined) return host.executor.requestCancel({ runId })
  const store = host.store
  if (store === undefined) return Effect.succeed("unknown")
  return Clock.currentTimeMillis.pipe(
    Effect.flatMap((now) => store.requestCancel(runId, now)),
    Effect.map((outcome): ControlExecutor.CancelRecord => {
      switch (outcome._tag) {
        case "CancelRequested":
          return "recorded"
        case "AlreadyRequested":
          return "already-requested"
        case "NotFound":
          return "unknown"
        case "Terminal":
          return { _tag: "Terminal", status: outcome.status }
      }
    }),
    Effect.mapError(persistence("request a cancel"))
  )
}

/** The run store's status of a row, when the store is available and the row exists. */
export const storeStatus = (host: Host, runId: string): Effect.Effect<RunStore.RunStatus | undefined> =>
  host.store === undefined
    ? Effect.succeed(undefined)
    : host.store.get(runId).pipe(
      Effect.map((row) => row.status),
      Effect.orElseSucceed(() => undefined)
    )

/**
 * Interrupts a cancelled run and settles it `cancelled`, journaling
 * `control.run.<status>` in the settling transaction. A run held by a live
 * peer is left to that peer; an unowned park is claimed first.
 */
export const interruptAndSettle = (
  host: Host,
  runId: string
): Effect.Effect<ControlSchema.RunSummary, ControlRuntime.OwnershipError> => {
  const settle = (
    write: Effect.Effect<ControlSchema.RunSummary, ControlRuntime.OwnershipError>
  ): Effect.Effect<ControlSchema.RunSummary, ControlRuntime.OwnershipError> =>
    transact(
      host,
      "cancel.settle",
      Effect.gen(function*() {
        const before = yield* host.runtime.getRun(runId)
        const after = yield* write
        if (!isTerminal(before.status) && isTerminal(after.status)) {
          yield* emit(host, runId, `control.run.${after.status}`, { runId, status: after.status })
        }
        return after
      }),
      runId
    )
  return host.runtime.interrupt(runId, settle).pipe(
    Effect.catchTag("ClaimLost", () =>
      Effect.gen(function*() {
        const current = yield* host.runtime.getRun(runId)
        if (isTerminal(current.status) || isLive(current)) return current
        yield* host.runtime.resume(runId)
        return yield* host.runtime.interrupt(runId, settle)
      }).pipe(Effect.catchTag("ClaimLost", () => host.runtime.getRun(runId)))
    )
  )
}
