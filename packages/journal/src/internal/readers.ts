/**
 * In-process followers: each `stream` registers its cursor (for `compact`'s
 * `reader_behind` check), a wake-up signal (an in-process commit for its run)
 * and a failure slot (a lossy loss or the layer closing while it follows).
 *
 * @internal
 */
import { Deferred, Effect, Queue } from "effect"
import type { JournalError } from "../Journal.js"

export interface Reader {
  readonly runId: string
  cursor: number
  readonly wake: Queue.Queue<void>
  readonly failure: Deferred.Deferred<never, JournalError>
}

export const makeReaders = () => {
  const byRun = new Map<string, Set<Reader>>()

  const register = (runId: string, cursor: number) =>
    Effect.acquireRelease(
      Effect.gen(function*() {
        const reader: Reader = {
          runId,
          cursor,
          wake: yield* Queue.sliding<void>(1),
          failure: yield* Deferred.make<never, JournalError>()
        }
        const set = byRun.get(runId) ?? new Set<Reader>()
        set.add(reader)
        byRun.set(runId, set)
        return reader
      }),
      (reader) =>
        Effect.sync(() => {
          const set = byRun.get(runId)
          set?.delete(reader)
          if (set?.size === 0) byRun.delete(runId)
        }).pipe(Effect.zipRight(Queue.shutdown(reader.wake)))
    )

  const notify = (runId: string): void => {
    for (const reader of byRun.get(runId) ?? []) Queue.unsafeOffer(reader.wake, undefined)
  }

  /** Fail every follower (a lossy loss or close). */
  const failAll = (error: JournalError): Effect.Effect<void> =>
    Effect.forEach(
      [...byRun.values()].flatMap((set) => [...set]),
      (reader) => Deferred.fail(reader.failure, error),
      { discard: true }
    )

  /** Whether an in-process follower of `runId` still needs entries below `checkpointSeq`. */
  const behind = (runId: string, checkpointSeq: number): boolean => {
    for (const reader of byRun.get(runId) ?? []) {
      if (reader.cursor < checkpointSeq - 1) return true
    }
    return false
  }

  return { register, notify, failAll, behind } as const
}

export type Readers = ReturnType<typeof makeReaders>
