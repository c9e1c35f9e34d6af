/**
 * Lost races between hosts. Under load hosts race for the same run and all but one lose; that is a
 * normal outcome an operator cannot act on, so it is logged at DEBUG without a cause. Anything else
 * (storage trouble, a defect) stays a WARN with its cause.
 */
import * as ControlSchema from "@baton/control/ControlSchema"
import * as Queues from "@baton/control/Queues"
import { Cause, Chunk, Effect } from "effect"
import { isFenceLoss } from "./executorJournal.js"

/** Outcome tags, and `ClaimLost` reasons, that mean another process got to the run first. */
const raceTags: ReadonlySet<string> = new Set([
  "AlreadyClaimed",
  "SnapshotChanged",
  "HeartbeatFresh",
  "ClaimChanged",
  "ClaimFresh",
  "Conflict"
])

/** `ClaimLost` reasons of a claim its run's queue refused (paused, or at its global limit). */
const queueReasons: ReadonlySet<string> = new Set([Queues.pausedReason, Queues.fullReason])

/** Whether a `ClaimLost` reason is a queue's refusal: an expected outcome, like a lost race. */
export const isQueueReason = (reason: unknown): boolean => typeof reason === "string" && queueReasons.has(reason)

const field = (error: unknown, name: string): string | undefined =>
  typeof error === "object" && error !== null && name in error ? String((error as Record<string, unknown>)[name]) : undefined

/** Whether `error` says another process holds or has settled the run (a claim or fence that was lost). */
export const isLostRaceError = (error: unknown): boolean =>
  isFenceLoss(error) || raceTags.has(field(error, "_tag") ?? "") || raceTags.has(field(error, "reason") ?? "") ||
  isQueueReason(field(error, "reason"))

/** Whether `cause` is only lost races: failures that all are, with no defect and no interruption. */
export const isLostRace = (cause: Cause.Cause<unknown>): boolean => {
  const failures = Chunk.toReadonlyArray(Cause.failures(cause))
  return failures.length > 0 && failures.every(isLostRaceError) && Chunk.isEmpty(Cause.defects(cause)) &&
    !Cause.isInterrupted(cause)
}

/** What the lost race was, for the DEBUG line: the error's tag and its reason, if any. */
const raceOf = (cause: Cause.Cause<unknown>): string => {
  const first = Chunk.toReadonlyArray(Cause.failures(cause))[0]
  const tag = field(first, "_tag") ?? "lost"
  const reason = field(first, "reason")
  return reason === undefined ? tag : `${tag} (${reason})`
}

/**
 * `resume` answers a run that ended between discovery and the claim with its final summary, not a
 * claim: another process settled it first, so there is nothing to drive.
 */
export const settledElsewhere = (summary: ControlSchema.RunSummary): boolean =>
  ControlSchema.isTerminalStatus(summary.status)

/** The DEBUG line of a lost race on `runId` (no cause: there is nothing to act on). */
export const logLostRace = (what: string, runId: string, race: string): Effect.Effect<void> =>
  Effect.logDebug(`${what}: lost the race for run ${runId}; another process holds or settled it`).pipe(
    Effect.annotateLogs({ runId, race })
  )

/**
 * Log a failed host step on `runId`: a lost race at DEBUG (`<what>: lost the race for run <id>`, no
 * cause), anything else at WARN (`warning`, default `<what> failed`) with its cause, cut to `limit`
 * characters.
 */
export const logFailure = (
  what: string,
  runId: string,
  cause: Cause.Cause<unknown>,
  options: { readonly warning?: string; readonly limit?: number } = {}
): Effect.Effect<void> =>
  isLostRace(cause)
    ? logLostRace(what, runId, raceOf(cause))
    : Effect.logWarning(options.warning ?? `${what} failed`).pipe(
      Effect.annotateLogs({ runId, cause: Cause.pretty(cause).slice(0, options.limit ?? 500) })
    )
