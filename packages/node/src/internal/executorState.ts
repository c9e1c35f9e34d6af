/**
 * The mutable state of one drive, reachable from the drive's `Run` service (a WeakMap keyed by
 * the service object), so `Step` functions need nothing in context but `Run`.
 */
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import type * as Journal from "@baton/journal/Journal"
import type * as OwnerId from "@baton/journal/OwnerId"
import type * as AttemptStore from "@baton/run-store/AttemptStore"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option } from "effect"
import type { DriveCause, EndReason, RunService } from "./executorTypes.js"

/** The services a drive writes through, captured at drive start. */
export interface DriveServices {
  readonly runtime: ControlRuntime.Service
  readonly attempts: AttemptStore.Service
  readonly journal: Journal.Service
  readonly sql: SqlClient.SqlClient
}

/** Per-drive mutable state. */
export interface DriveState {
  readonly run: RunService
  readonly fence: string
  readonly services: DriveServices
  /** Latest attempt per step key digest, read once at drive start, updated as steps finish. */
  readonly latest: Map<string, AttemptStore.Attempt>
  readonly usedNames: Set<string>
  readonly hostLabel: string
  /** True while the host drains: `Step.run` starts no new step. */
  readonly stopping: () => boolean
  /** The plan card's envelope, for node approval targets. */
  readonly envelope: unknown
  /** The owner the run had before this drive's claim (for `abandoned` records), if known. */
  readonly previousOwner: OwnerId.OwnerId | null
  endReason: Option.Option<EndReason>
  drives: number
  takeovers: number
  skippedSteps: number
  resumedFromCheckpoint: number
  stepsCompleted: number
  /** Lossy entries this drive queued, and how many of them a finished `flush` covered. */
  lossyQueued: number
  lossyFlushed: number
  /**
   * The drive's opening writes (`baton.run.driven`, and `running` unless the run is already), while
   * not yet written: they ride on the drive's first transaction (`withPrelude`).
   */
  prelude: Effect.Effect<void, unknown> | undefined
  /** When the run was put back for a retry: the epoch ms it becomes available again. */
  retryAtMs?: number | undefined
  /** Held while the prelude is written, so it is written once and before any later write. */
  readonly preludeLock: Effect.Semaphore
}

const states = new WeakMap<RunService, DriveState>()

export const register = (state: DriveState): void => {
  states.set(state.run, state)
}

export const stateOf = (run: RunService): DriveState | undefined => states.get(run)

/** Set the end reason once: the first cause of a drive's end wins. */
export const markEnd = (state: DriveState, reason: EndReason): void => {
  if (Option.isNone(state.endReason)) state.endReason = Option.some(reason)
}

/** End the drive now: record why, then interrupt the handler fiber (finalizers run). */
export const endDrive = (state: DriveState, reason: EndReason): Effect.Effect<never> =>
  Effect.suspend(() => {
    markEnd(state, reason)
    return Effect.interrupt
  })

export type { DriveCause, EndReason, OwnerId }
