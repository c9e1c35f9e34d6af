/** One drive of a run: claim fence → handler fiber with its heartbeat → settle (docs/design/fencing-and-leases.md). */
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import type * as ControlSchema from "@baton/control/ControlSchema"
import type * as Journal from "@baton/journal/Journal"
import type * as JournalEvent from "@baton/journal/JournalEvent"
import type * as OwnerId from "@baton/journal/OwnerId"
import type * as AttemptStore from "@baton/run-store/AttemptStore"
import * as Heartbeat from "@baton/run-store/Heartbeat"
import * as RunStore from "@baton/run-store/RunStore"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Clock, Duration, Effect, Exit, Fiber, Layer, Option, Schema } from "effect"
import type * as Flow from "../Flow.js"
import { retryDelay } from "../Flow.js"
import { Run } from "../Run.js"
import { jsonIssue, parseIssue } from "./executorJson.js"
import { durable, flushLossy, isFenceLoss, nodeSource, withPrelude, writePrelude } from "./executorJournal.js"
import { StepMisuse } from "./executorMisuse.js"
import { type DriveState, markEnd, register } from "./executorState.js"
import { errorRecord, isLost, recordReserved } from "./executorStep.js"
import { logFailure } from "./hostRaces.js"
import type { DriveCause, EndReason, RunService } from "./executorTypes.js"

/** What a drive needs from its host. */
export interface DriveEnv {
  readonly runtime: ControlRuntime.Service
  readonly runStore: RunStore.Service
  /** The host's shared heartbeat: every drive's lease renews in the same statement. */
  readonly pulse: Heartbeat.PulseService
  readonly attempts: AttemptStore.Service
  readonly journal: Journal.Service
  readonly sql: SqlClient.SqlClient
  readonly hostLabel: string
  readonly flowFor: (flowId: string) => Effect.Effect<Flow.Any | undefined>
  readonly stopping: () => boolean
}

/** Live handle of a drive, for the host supervisor. */
export interface DriveControl {
  /** Set once the drive has its state (after the claim fence was read). */
  state: DriveState | undefined
  handler: Fiber.RuntimeFiber<unknown, unknown> | undefined
}

/** What the caller already read of a run it hands over (a launch's summary and plan): not read again. */
export interface DriveKnown {
  readonly summary: ControlSchema.RunSummary
  readonly plan?: ControlRuntime.StoredPlan | undefined
  /** The claim's fence and lease stamp (a batch claim answers them). */
  readonly fence?: string | undefined
  readonly heartbeatAtMs?: number | undefined
  /** Never driven: no drive, takeover or attempt of the run exists to read. */
  readonly neverDriven?: boolean | undefined
}

/** How a drive ended. */
export interface DriveEnd {
  readonly runId: string
  readonly reason: EndReason
  readonly released: boolean
  readonly lapsed: boolean
  /** Put back for a retry: the epoch ms it becomes available again (a host wakes then to claim it). */
  readonly availableAtMs?: number | undefined
}

const maxResultBytes = 1024 * 1024

// UTF-8 bytes, not UTF-16 units: a code unit is at most 3 bytes, so short texts skip the count.
const tooLarge = (text: string): boolean =>
  text.length > maxResultBytes || (text.length * 3 > maxResultBytes && Buffer.byteLength(text, "utf8") > maxResultBytes)

/**
 * How long a handler may run before its drive's opening entry is written on its own: long enough
 * that a short run's first write carries it, short enough that `running` shows promptly.
 */
const preludeLingerMs = 50

const platform = Layer.mergeAll(NodeFileSystem.layer, NodePath.layer)

/** How many `baton.run.driven` and `baton.run.taken-over` entries the run has: one read for both. */
const countDrives = (journal: Journal.Service, runId: string) =>
  journal.entries(
    { runId, eventTypes: ["baton.run.driven", "baton.run.taken-over"], limit: 10_000 } as Journal.EntriesOptions
  ).pipe(
    Effect.map((page) => {
      let driven = 0
      for (const entry of page.entries) if (entry.eventType === "baton.run.driven") driven++
      return { driven, takeovers: page.entries.length - driven }
    }),
    Effect.orElseSucceed(() => ({ driven: 0, takeovers: 0 }))
  )

/**
 * Release a run this drive still owns: fenced `baton.run.released { reason, drive }` and
 * `ControlRuntime.releasePending` in one journal transaction. Answers whether it committed.
 */
export const release = (
  env: DriveEnv,
  state: DriveState | { readonly run: RunService; readonly fence: string },
  reason: "shutdown" | "lease-lapsed" | "storage-failed"
): Effect.Effect<boolean> =>
  Effect.suspend(() => {
    const released = env.journal.transact(
      Effect.gen(function*() {
        yield* env.journal.emitDurable(
          {
            runId: state.run.runId,
            sourceId: nodeSource,
            eventType: "baton.run.released",
            payload: { reason, drive: state.run.drive }
          } as JournalEvent.Input,
          state.run.owner
        )
        yield* env.runtime.releasePending(state.run.runId, state.fence)
      }),
      { key: state.run.runId }
    )
    if (!("services" in state)) return released
    // After storage trouble a flush would only wait on the same failing writer.
    return (reason !== "storage-failed" ? flushLossy(state) : Effect.void).pipe(Effect.zipRight(withPrelude(state, released)))
  }).pipe(
    Effect.as(true),
    Effect.catchAllCause((cause) =>
      logFailure("release", state.run.runId, cause, { warning: "could not release a run" }).pipe(
        Effect.annotateLogs({ reason }),
        Effect.as(false)
      )
    )
  )

const settle = (
  env: DriveEnv,
  state: DriveState,
  status: "completed" | "failed",
  body: Effect.Effect<void, unknown>
): Effect.Effect<void> =>
  flushLossy(state).pipe(Effect.zipRight(withPrelude(
    state,
    env.journal.transact(
      Effect.gen(function*() {
        yield* body
        yield* env.runtime.writeStatus(state.run.runId, state.fence, status)
      }),
      { key: state.run.runId }
    )
  ))).pipe(
    Effect.catchAllCause((cause) => {
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure) && (isLost(failure.value) || isFenceLoss(failure.value))) {
        return Effect.logInfo("run settled elsewhere: this drive lost its fence").pipe(
          Effect.annotateLogs({ runId: state.run.runId })
        )
      }
      return Effect.logError("could not settle a run; another host will drive it again").pipe(
        Effect.annotateLogs({ runId: state.run.runId, status, cause: Cause.pretty(cause).slice(0, 1000) })
      )
    })
  )

const failureRecord = (cause: Cause.Cause<unknown>, flow?: Flow.Any) => {
  const defect = Cause.dieOption(cause)
  if (Option.isSome(defect) && defect.value instanceof StepMisuse) {
    const misuse = defect.value
    return {
      tag: "StepMisuse",
      message: `StepMisuse ${misuse.code}: ${misuse.message}`,
      ...(misuse.step.length > 0 ? { step: misuse.step } : {}),
      defect: true
    }
  }
  const failure = Cause.failureOption(cause)
  // A typed failure the flow's error schema encodes is recorded as `value`, so an awaiter decodes it.
  const encoded = flow?.error === undefined || Option.isNone(failure)
    ? undefined
    : Schema.encodeEither(flow.error)(failure.value)
  const value = encoded?._tag === "Right" && jsonIssue(encoded.right, "error") === undefined ? encoded.right : undefined
  const base = value === undefined ? errorRecord(cause) : { ...errorRecord(cause), value }
  return Option.isSome(defect) && Option.isNone(Cause.failureOption(cause))
    ? { ...base, defect: true, message: Cause.pretty(cause).slice(0, 4000) }
    : base
}

const settleSuccess = (env: DriveEnv, state: DriveState, flow: Flow.Any, value: unknown) =>
  Effect.gen(function*() {
    const encoded = flow.output === undefined
      ? Either_right(value)
      : yield* Effect.either(Schema.encode(flow.output)(value))
    const json = encoded._tag === "Right" ? encoded.right : undefined
    // A handler returning nothing completes with no value (the `$result` outcome is `{}`).
    // The messages name the path and the rule, never the value (a result may hold anything).
    const issue = encoded._tag === "Left"
      ? `the run's result does not encode with the flow's output schema (${parseIssue("result", encoded.left)})`
      : json === undefined
      ? undefined
      : jsonIssue(json, "result")
    const text = issue !== undefined ? undefined : json === undefined ? "" : JSON.stringify(json)
    if (text === undefined || tooLarge(text)) {
      markEnd(state, "failed")
      const message = text === undefined
        ? encoded._tag === "Left" ? issue! : `the run's result is not JSON: ${issue}`
        : "the run's result exceeds 1 MiB"
      return yield* settleFailure(env, state, { tag: "ResultInvalid", message })
    }
    markEnd(state, "completed")
    yield* settle(
      env,
      state,
      "completed",
      Effect.gen(function*() {
        yield* recordReserved(state, "$result", "completed", { outcome: json === undefined ? {} : { value: json } })
        yield* durable(state, "baton.run.completed", { steps: completedSteps(state), resultBytes: text.length })
      })
    )
  })

/** The run's completed steps over all its drives (reserved `$…` attempts are not steps). */
const completedSteps = (state: DriveState): number => {
  let steps = 0
  for (const attempt of state.latest.values()) {
    const name = (attempt.meta as { name?: unknown } | undefined)?.name
    if (attempt.state === "completed" && !(typeof name === "string" && name.startsWith("$"))) steps++
  }
  return steps
}

const Either_right = (value: unknown) => ({ _tag: "Right" as const, right: value })

/**
 * A failed run with attempts left goes back to its queue instead of failing: the error joins its
 * history (`baton.run.retrying`), its attempt counts up and it becomes available after the policy's
 * next delay, released in the same transaction. Answers whether it was released so.
 */
const retryLater = (env: DriveEnv, state: DriveState, error: Record<string, unknown>): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const runId = state.run.runId
    const queueing = yield* env.runtime.queueing(runId)
    if (queueing === undefined || queueing.retry === undefined) return false
    const policy = queueing.retry
    const attempt = queueing.attempt
    const nowMs = yield* Clock.currentTimeMillis
    const delay = yield* retryDelay(policy, attempt, nowMs)
    if (Option.isNone(delay)) return false
    const availableAtMs = nowMs + Math.ceil(Duration.toMillis(delay.value))
    markEnd(state, "retrying")
    yield* flushLossy(state)
    yield* withPrelude(
      state,
      env.journal.transact(
        Effect.gen(function*() {
          yield* durable(state, "baton.run.retrying", { attempt, error, availableAtMs })
          yield* env.runtime.requeue(runId, state.fence, attempt, availableAtMs)
        }),
        { key: runId }
      )
    )
    state.retryAtMs = availableAtMs
    return true
  }).pipe(
    Effect.catchAllCause((cause) =>
      logFailure("retry", state.run.runId, cause, { warning: "could not schedule a retry; the run fails" }).pipe(Effect.as(false))
    )
  )

const settleFailure = (env: DriveEnv, state: DriveState, error: Record<string, unknown>) => {
  markEnd(state, "failed")
  return settle(
    env,
    state,
    "failed",
    Effect.gen(function*() {
      yield* recordReserved(state, "$result", "failed", { error })
      yield* durable(state, "baton.run.failed", { error })
    })
  )
}

/**
 * Drive `runId`, which this process must own (the caller claimed it through control). Returns
 * once the handler ended and its end was settled, parked or released.
 */
export const drive = (
  env: DriveEnv,
  control: DriveControl,
  runId: string,
  cause: DriveCause,
  previousOwner: OwnerId.OwnerId | null,
  known?: DriveKnown
): Effect.Effect<DriveEnd> =>
  Effect.gen(function*() {
    const fence = known?.fence ?? (yield* env.runtime.claimFence(runId))
    const owner = JSON.parse(fence) as OwnerId.OwnerId
    const heartbeatAtMs = known?.fence !== undefined && known.heartbeatAtMs !== undefined
      ? known.heartbeatAtMs
      : (yield* env.runStore.get(runId)).heartbeatAtMs
    const summary = known?.summary ?? (yield* env.runtime.getRun(runId))
    const flow = yield* env.flowFor(summary.flowId)
    const neverDriven = known?.neverDriven === true
    const counted = neverDriven ? { driven: 0, takeovers: 0 } : yield* countDrives(env.journal, runId)
    const drives = counted.driven + 1
    const takeovers = counted.takeovers
    const run: RunService = {
      runId,
      flowId: summary.flowId,
      planId: Option.fromNullable(summary.planId),
      drive: drives,
      cause,
      owner
    }
    if (flow === undefined) {
      yield* release(env, { run, fence }, "shutdown")
      return { runId, reason: "shutdown", released: true, lapsed: false } satisfies DriveEnd
    }
    const plan = summary.planId === undefined
      ? undefined
      : known?.plan !== undefined && known.plan.card.planId === summary.planId
      ? known.plan
      : yield* env.runtime.getPlan(summary.planId)
    const attempts = neverDriven ? [] : yield* env.attempts.list(runId)
    const latest = new Map<string, AttemptStore.Attempt>()
    for (const attempt of attempts) {
      const current = latest.get(attempt.stepKeyDigest)
      if (current === undefined || attempt.attempt > current.attempt) latest.set(attempt.stepKeyDigest, attempt)
    }
    const state: DriveState = {
      run,
      fence,
      services: { runtime: env.runtime, attempts: env.attempts, journal: env.journal, sql: env.sql },
      latest,
      usedNames: new Set(),
      hostLabel: env.hostLabel,
      stopping: env.stopping,
      envelope: plan?.card.envelope,
      previousOwner,
      endReason: Option.none(),
      drives,
      takeovers,
      skippedSteps: 0,
      resumedFromCheckpoint: 0,
      stepsCompleted: 0,
      lossyQueued: 0,
      lossyFlushed: 0,
      prelude: undefined,
      preludeLock: yield* Effect.makeSemaphore(1)
    }
    register(state)
    control.state = state
    const completedSteps = Array.from(latest.values()).filter((a) => a.state === "completed").length
    // The drive's opening writes: its journal entry and control's `running` status, together, in front
    // of the drive's first write (a step's start, a park, the settle), or on their own once the
    // handler has run `preludeLingerMs` without writing. Annotated: a conditional of two Effects as
    // an overloaded combinator's argument left the choice of overload to inference, which a
    // declaration build once resolved differently.
    const markRunning: Effect.Effect<void, ControlRuntime.OwnershipError> = summary.status === "running"
      ? Effect.void
      : Effect.asVoid(env.runtime.writeStatus(runId, fence, "running"))
    state.prelude = Effect.zipRight(
      durable(state, "baton.run.driven", {
        drive: drives,
        owner: { hostId: owner.hostId, pid: owner.pid },
        cause,
        skippedSteps: completedSteps
      }),
      markRunning
    )
    const handler = Schema.decodeUnknown(flow.input)(plan?.decodedInput).pipe(
      Effect.mapError((error) => ({ _tag: "InvalidInput", message: `input: ${error.message}` })),
      Effect.flatMap((input) => flow.handler(input)),
      Effect.provideService(Run, run),
      Effect.provideService(SqlClient.SqlClient, env.sql),
      Effect.provide(platform)
    ) as Effect.Effect<unknown, unknown>
    const fiber = yield* Effect.forkDaemon(handler)
    control.handler = fiber
    const opening = yield* Effect.forkDaemon(
      Effect.sleep(preludeLingerMs).pipe(
        Effect.zipRight(Effect.uninterruptible(writePrelude(state))),
        Effect.catchAll((error) =>
          Effect.sync(() => markEnd(state, isFenceLoss(error) ? "lease-lost" : "storage-failed")).pipe(
            Effect.zipRight(Fiber.interrupt(fiber))
          )
        )
      )
    )
    yield* env.runtime.registerFiber(runId, fiber).pipe(Effect.ignore)
    let lapsed = false
    const heartbeat = yield* Effect.forkDaemon(
      Heartbeat.keepAlive(runId, owner, fiber, {
        ...(heartbeatAtMs === null ? {} : { heartbeatAtMs }),
        onLapse: () =>
          Effect.sync(() => {
            lapsed = true
            markEnd(state, "lease-lost")
          })
      }).pipe(
        Effect.tap(() => Effect.sync(() => markEnd(state, "lease-lost"))),
        Effect.provideService(RunStore.RunStore, env.runStore),
        Effect.provideService(Heartbeat.Pulse, env.pulse)
      )
    )
    const exit = yield* Fiber.await(fiber)
    yield* Fiber.interrupt(opening)
    let released = false
    if (Exit.isSuccess(exit)) {
      yield* settleSuccess(env, state, flow, exit.value)
    } else if (!Cause.isInterruptedOnly(exit.cause)) {
      const record = failureRecord(exit.cause, flow)
      released = yield* retryLater(env, state, record)
      if (!released) yield* settleFailure(env, state, record)
    } else {
      if (Option.isNone(state.endReason)) {
        // Interrupted from outside: the heartbeat loop (loss), a facade cancel, or shutdown.
        const ended = yield* Fiber.await(heartbeat).pipe(Effect.timeout("200 millis"), Effect.option)
        if (Option.isSome(ended)) markEnd(state, "lease-lost")
        else {
          const now = yield* env.runStore.get(runId).pipe(Effect.option)
          const cancelled = Option.isSome(now) && now.value.cancelRequestedAtMs !== null
          markEnd(state, cancelled ? "cancelled" : "shutdown")
        }
      }
      const reason = Option.getOrElse(state.endReason, () => "shutdown" as const)
      if (reason === "cancelled") {
        // Control's interrupt settlement writes the cancel; keep beating until it has.
        yield* Fiber.await(heartbeat).pipe(Effect.timeout("5 seconds"), Effect.ignore)
      } else if (reason === "shutdown") {
        released = yield* release(env, state, "shutdown")
      } else if (reason === "storage-failed") {
        released = yield* release(env, state, "storage-failed").pipe(
          Effect.timeout("2 seconds"),
          Effect.orElseSucceed(() => false)
        )
      } else if (reason === "lease-lost" && lapsed) {
        released = yield* release(env, state, "lease-lapsed").pipe(
          Effect.timeout("2 seconds"),
          Effect.orElseSucceed(() => false)
        )
      }
    }
    yield* Fiber.interrupt(heartbeat)
    return {
      runId,
      reason: Option.getOrElse(state.endReason, () => "shutdown" as const),
      released,
      lapsed,
      ...(state.retryAtMs === undefined ? {} : { availableAtMs: state.retryAtMs })
    } satisfies DriveEnd
  }).pipe(
    Effect.catchAllCause((cause) =>
      logFailure("drive", runId, cause, { warning: "drive ended early", limit: 1000 }).pipe(
        Effect.as<DriveEnd>({ runId, reason: "lease-lost", released: false, lapsed: false })
      )
    )
  )
