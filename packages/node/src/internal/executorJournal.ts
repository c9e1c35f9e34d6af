/** Journal writes of the executor: source id, fenced appends, and how failures end a drive. */
import * as DurableWriter from "@baton/database/DurableWriter"
import type * as JournalEvent from "@baton/journal/JournalEvent"
import { Effect } from "effect"
import { type DriveState, endDrive } from "./executorState.js"

/** Source id of every entry this package writes. */
export const nodeSource = "@baton/node"

/** Error codes that mean "this drive no longer holds the run". */
const lostCodes = new Set(["fence_lost", "claim_lost"])

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

/** Whether a failure means the fence is gone (as opposed to storage trouble). */
export const isFenceLoss = (error: unknown): boolean => {
  const code = codeOf(error)
  if (code !== undefined && lostCodes.has(code)) return true
  const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : ""
  return tag === "ClaimLost" || tag === "FenceLost"
}

/** End the drive for a failed write: `lease-lost` when the fence is gone, else `storage-failed`. */
export const failJournal = (state: DriveState, error: unknown): Effect.Effect<never> =>
  Effect.logWarning("node executor write failed; ending the drive").pipe(
    Effect.annotateLogs({ runId: state.run.runId, code: codeOf(error) ?? "unknown" }),
    Effect.zipRight(endDrive(state, isFenceLoss(error) ? "lease-lost" : "storage-failed"))
  )

/** A fenced durable append on the run's own stream. */
export const durable = (state: DriveState, eventType: string, payload: unknown) =>
  state.services.journal.emitDurable(
    { runId: state.run.runId, sourceId: nodeSource, eventType, payload } as JournalEvent.Input,
    state.run.owner
  )

/** A lossy append on the run's own stream; failures are logged and ignored. */
export const lossy = (state: DriveState, eventType: string, payload: unknown): Effect.Effect<void> =>
  state.services.journal.emitLossy(
    { runId: state.run.runId, sourceId: nodeSource, eventType, payload } as JournalEvent.Input
  ).pipe(
    Effect.tap((receipt) =>
      Effect.sync(() => {
        // Counted once queued, so a later flush knows it has something to wait for.
        if (receipt._tag === "Accepted" || (receipt._tag === "Duplicate" && receipt.status === "pending")) {
          state.lossyQueued++
        }
      })
    ),
    Effect.asVoid,
    Effect.catchAll(() => Effect.void)
  )

/**
 * Commit this drive's queued lossy entries before a durable one, so `seq` follows what happened
 * (a step's `started` and `checkpoint` before its `completed`). The journal assigns lossy seqs only
 * when its writer commits, so without this a durable entry written meanwhile lands first. Call it
 * OUTSIDE any write transaction (the lossy writer needs the lock). No-op (no
 * transaction) when nothing this drive queued is pending; a failed flush is logged and ignored,
 * as the lossy channel's losses are.
 */
export const flushLossy = (state: DriveState): Effect.Effect<void> =>
  Effect.suspend(() => {
    const upTo = state.lossyQueued
    if (upTo <= state.lossyFlushed) return Effect.void
    return state.services.journal.flush.pipe(
      Effect.catchAll((error) =>
        Effect.logDebug("lossy journal entries lost before a durable one").pipe(
          Effect.annotateLogs({ runId: state.run.runId, code: codeOf(error) ?? "unknown" })
        )
      ),
      Effect.zipRight(Effect.sync(() => {
        if (upTo > state.lossyFlushed) state.lossyFlushed = upTo
      }))
    )
  })

/**
 * `write` with the drive's prelude in front of it while that is unwritten: one transaction holds
 * both (`write` nests in it), so a drive's opening entry costs no transaction of its own. Once
 * written, `write` runs as is. Call it outside any transaction, after `flushLossy`.
 */
export const withPrelude = <A, E>(state: DriveState, write: Effect.Effect<A, E>): Effect.Effect<A, E | unknown> =>
  // A drive's write fails whole or commits whole (nothing in it recovers from a nested failure), so its
  // nested writes join it without savepoints.
  DurableWriter.joinWithoutSavepoints(Effect.suspend(() =>
    state.prelude === undefined ? write : state.preludeLock.withPermits(1)(Effect.suspend(() => {
      const prelude = state.prelude
      if (prelude === undefined) return write
      return state.services.journal.transact(Effect.zipRight(prelude, write), { key: state.run.runId }).pipe(
        Effect.tap(() => Effect.sync(() => (state.prelude = undefined)))
      )
    }))
  ))

/** Write the drive's prelude now, in a transaction of its own, if it is still unwritten. */
export const writePrelude = (state: DriveState): Effect.Effect<void, unknown> => withPrelude(state, Effect.void)
