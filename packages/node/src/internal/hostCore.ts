/**
 * The host's driving core: the runs driven here, capacity, events, and the drain/stop flags.
 * Shared by the executor (launch, resume, signal) and the supervisor (sweep, shutdown).
 */
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import type * as Journal from "@baton/journal/Journal"
import type * as OwnerId from "@baton/journal/OwnerId"
import type * as AttemptStore from "@baton/run-store/AttemptStore"
import * as Heartbeat from "@baton/run-store/Heartbeat"
import type * as RunStore from "@baton/run-store/RunStore"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Duration, Effect, Fiber, FiberSet, Option, PubSub, Queue, type Scope } from "effect"
import type * as Flow from "../Flow.js"
import type * as HostIdentity from "../HostIdentity.js"
import type * as ProcessLiveness from "../ProcessLiveness.js"
import { drive, type DriveControl, type DriveEnd, type DriveEnv, type DriveKnown } from "./executorDrive.js"
import { markEnd } from "./executorState.js"
import type { DriveCause } from "./executorTypes.js"

/** What the host reports as it works (`NodeHost.events`). */
export type HostEvent =
  | { readonly _tag: "claimed"; readonly runId: string; readonly flowId: string; readonly cause: DriveCause }
  | { readonly _tag: "released"; readonly runId: string; readonly reason: string }
  | { readonly _tag: "lapsed"; readonly runId: string }
  | { readonly _tag: "settled"; readonly runId: string; readonly reason: string }
  | { readonly _tag: "skipped-drift"; readonly runId: string; readonly message: string }

/** One run driven here. */
export interface Driven {
  readonly runId: string
  readonly flowId: string
  /** The run's queue, when this host has per-host queue limits (else not looked up). */
  readonly queue: string | undefined
  readonly cause: DriveCause
  readonly sinceMs: number
  readonly control: DriveControl
  readonly done: Effect.Effect<DriveEnd>
}

/** The core's services and catalog. */
export interface CoreOptions {
  readonly identity: HostIdentity.HostIdentity
  readonly mode: "host" | "client"
  readonly maxRuns: number
  /** Per-host limits: queue name → at most this many drives here. */
  readonly queueLimits: ReadonlyMap<string, number>
  readonly flows: () => Effect.Effect<ReadonlyArray<Flow.Any>, unknown>
  readonly liveness: ProcessLiveness.Probe | undefined
  readonly check: (owner: OwnerId.OwnerId, context: { claimant: OwnerId.OwnerId; heartbeatAtMs: number | null; nowMs: number }) => Effect.Effect<boolean>
  readonly runtime: ControlRuntime.Service
  readonly runStore: RunStore.Service
  readonly attempts: AttemptStore.Service
  readonly journal: Journal.Service
  readonly sql: SqlClient.SqlClient
}

export interface HostCore extends CoreOptions {
  readonly driven: Map<string, Driven>
  /** Runs whose code-drift skip was logged already (once per run, whichever path skipped it). */
  readonly driftLogged: Set<string>
  readonly events: PubSub.PubSub<HostEvent>
  /** Stop accepting: launches answer `pending`, resumes `unknown`, the sweep stops claiming. */
  accepting: boolean
  /** Draining: `Step.run` starts no new step. */
  draining: boolean
  readonly capacity: () => number
  /** Whether this host may start one more drive of `queue` under its per-host limit. */
  readonly queueRoom: (queue: string | undefined) => boolean
  /** A run's queue, read only when this host has per-host limits (else `undefined`, no statement). */
  readonly queueOf: (runId: string) => Effect.Effect<string | undefined>
  /**
   * Ask for a discovery pass now (a slot freed, a run was started in this process). Wakes coalesce:
   * at most one pass is pending at a time; the supervisor takes them (`wakes`).
   */
  readonly wake: Effect.Effect<void>
  readonly wakes: Queue.Dequeue<void>
  readonly flowFor: (flowId: string) => Effect.Effect<Flow.Any | undefined>
  /**
   * Start driving a run this process now owns; false when it could not (capacity, the queue's per-host
   * limit, stopping). Callers check `capacity` and `queueRoom` before they claim.
   */
  readonly startDrive: (
    runId: string,
    flowId: string,
    cause: DriveCause,
    previousOwner?: OwnerId.OwnerId | null,
    queue?: string,
    known?: DriveKnown
  ) => Effect.Effect<boolean>
  /** Mark every drive as ending for `reason` and interrupt its handler. */
  readonly interruptAll: (reason: "shutdown") => Effect.Effect<void>
  readonly publish: (event: HostEvent) => Effect.Effect<void>
}

export const make = (options: CoreOptions): Effect.Effect<HostCore, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const events = yield* PubSub.sliding<HostEvent>(1024)
    // Made before the drives' fiber set, so it closes after them (finalizers run in reverse):
    // drives still settling at shutdown keep their leases.
    const pulse = yield* Heartbeat.makePulse
    const fibers = yield* FiberSet.make<DriveEnd>()
    const driven = new Map<string, Driven>()
    const publish = (event: HostEvent) => PubSub.publish(events, event).pipe(Effect.asVoid)
    // Capacity one, sliding: a wake while one is pending is the same wake.
    const wakes = yield* Queue.sliding<void>(1)
    const wake = Queue.offer(wakes, undefined).pipe(Effect.asVoid)
    const limits = options.queueLimits
    const queueRoom = (queue: string | undefined) => {
      const limit = queue === undefined ? undefined : limits.get(queue)
      if (limit === undefined) return true
      let here = 0
      for (const entry of driven.values()) if (entry.queue === queue) here++
      return here < limit
    }
    const queueOf = (runId: string): Effect.Effect<string | undefined> =>
      limits.size === 0
        ? Effect.succeed(undefined)
        : options.runtime.queueing(runId).pipe(
          Effect.map((queueing) => queueing?.queue),
          // Unknown is unlimited: a failed read must not strand a run this host already owns.
          Effect.orElseSucceed(() => undefined)
        )
    const flowFor = (flowId: string) =>
      options.flows().pipe(
        Effect.map((flows) => flows.find((flow) => flow.id === flowId)),
        Effect.orElseSucceed(() => undefined)
      )
    const core: HostCore = {
      ...options,
      driven,
      driftLogged: new Set(),
      events,
      accepting: true,
      draining: false,
      capacity: () => options.maxRuns - driven.size,
      queueRoom,
      queueOf,
      wake,
      wakes,
      flowFor,
      publish,
      startDrive: (runId, flowId, cause, previousOwner = null, given, known) =>
        Effect.gen(function*() {
          if (driven.has(runId)) return true
          if (!core.accepting || driven.size >= options.maxRuns) return false
          const queue = given ?? (yield* queueOf(runId))
          if (!queueRoom(queue)) return false
          const control: DriveControl = { state: undefined, handler: undefined }
          const env: DriveEnv = {
            runtime: options.runtime,
            runStore: options.runStore,
            pulse,
            attempts: options.attempts,
            journal: options.journal,
            sql: options.sql,
            hostLabel: `${options.identity.hostId}:${options.identity.pid}`,
            flowFor,
            stopping: () => core.draining
          }
          const sinceMs = yield* Clock.currentTimeMillis
          const fiber = yield* FiberSet.run(
            fibers,
            drive(env, control, runId, cause, previousOwner, known).pipe(
              Effect.tap((end) =>
                Effect.gen(function*() {
                  driven.delete(runId)
                  // A slot is free: look for the next run now rather than at the next sweep tick.
                  yield* wake
                  // A run put back for a retry is claimable at its time: look again then, not a sweep later.
                  if (end.availableAtMs !== undefined) {
                    const inMs = end.availableAtMs - (yield* Clock.currentTimeMillis)
                    yield* Effect.forkIn(Effect.delay(wake, Duration.millis(Math.max(0, inMs) + 5)), scope)
                  }
                  if (end.lapsed) yield* publish({ _tag: "lapsed", runId })
                  if (end.released) yield* publish({ _tag: "released", runId, reason: end.reason })
                  else yield* publish({ _tag: "settled", runId, reason: end.reason })
                })
              ),
              Effect.ensuring(Effect.sync(() => driven.delete(runId)))
            )
          )
          driven.set(runId, {
            runId,
            flowId,
            queue,
            cause,
            sinceMs,
            control,
            done: fiber.await.pipe(
              Effect.map((exit) =>
                exit._tag === "Success"
                  ? exit.value
                  : { runId, reason: "shutdown" as const, released: false, lapsed: false }
              )
            )
          })
          yield* publish({ _tag: "claimed", runId, flowId, cause })
          return true
        }),
      interruptAll: (reason) =>
        Effect.forEach(Array.from(driven.values()), (entry) =>
          Effect.gen(function*() {
            if (entry.control.state !== undefined) markEnd(entry.control.state, reason)
            if (entry.control.handler !== undefined) {
              yield* Fiber.interruptFork(entry.control.handler)
            }
          }), { discard: true })
    }
    return core
  })

/** Whether a run is driven here (and its drive has a state). */
export const drivenState = (core: HostCore, runId: string) =>
  Option.fromNullable(core.driven.get(runId)?.control.state)
