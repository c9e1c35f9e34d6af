/**
 * The identity check and append of one entry, run with the run's head already
 * locked. Collisions are found by reading before inserting,
 * never by catching a constraint violation (which aborts a PostgreSQL transaction).
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { JournalError } from "../Journal.js"
import { makeEventId } from "../JournalEvent.js"
import type { Admitted } from "./admission.js"
import { conflict, exhausted, seqTaken } from "./errors.js"
import type { IdentityCache } from "./identityCache.js"
import { contentKey, type NewEntry, sameContent, type Store } from "./store.js"
import { maxSeq } from "./text.js"

export type AppendResult =
  | { readonly _tag: "Appended"; readonly entry: NewEntry; readonly contentKey: string }
  | {
    readonly _tag: "Duplicate"
    readonly seq: number
    readonly sourceSeq: number
    readonly eventId: string
    /** The stored content's key (unknown for a tombstone under `dedupe: "identity"` with other content). */
    readonly contentKey: string | undefined
  }
  | { readonly _tag: "Refused"; readonly error: JournalError }

/**
 * `headIsOurs`: the locked head is the one this process's last committed append left, so nobody
 * appended since and a floor this process holds for the producer needs no read.
 */
export const appendLocked = (
  store: Store,
  cache: IdentityCache,
  item: Admitted,
  nextSeq: number,
  headIsOurs = false
): Effect.Effect<AppendResult, SqlError | JournalError> =>
  Effect.gen(function*() {
    const key = contentKey(item.eventType, item.payloadJson, item.metaJson)
    let sourceSeq: number
    if (item.sourceSeq !== undefined) {
      sourceSeq = item.sourceSeq
      const eventId = makeEventId(item.runId, item.sourceId, sourceSeq)
      const found = yield* store.findIdentity(item.runId, eventId)
      if (found !== undefined) {
        const same = sameContent(found, key)
        // The first row stands: cache what is stored, never the discarded content of an identity dedupe.
        const stored = found._tag === "Row" ? found.contentKey : same ? key : undefined
        return same || item.dedupe === "identity"
          ? { _tag: "Duplicate", seq: found.seq, sourceSeq, eventId, contentKey: stored } as const
          : { _tag: "Refused", error: conflict(eventId) } as const
      }
      cache.raiseFloor(item.runId, item.sourceId, sourceSeq + 1, true)
    } else {
      const known = headIsOurs ? cache.floor(item.runId, item.sourceId) : undefined
      const durableNext = known ?? (yield* store.durableNext(item.runId, item.sourceId))
      sourceSeq = Math.max(durableNext, cache.floor(item.runId, item.sourceId) ?? 0, cache.hint(item.runId, item.sourceId))
      cache.raiseFloor(item.runId, item.sourceId, sourceSeq + 1, false)
    }
    if (nextSeq >= maxSeq || sourceSeq >= Number.MAX_SAFE_INTEGER) {
      return { _tag: "Refused", error: exhausted(item.runId) } as const
    }
    const entry: NewEntry = {
      runId: item.runId,
      seq: nextSeq,
      eventId: makeEventId(item.runId, item.sourceId, sourceSeq),
      sourceId: item.sourceId,
      sourceSeq,
      emittedAtMs: item.emittedAtMs,
      eventType: item.eventType,
      payloadJson: item.payloadJson,
      metaJson: item.metaJson
    }
    if (!(yield* store.insert(entry))) return { _tag: "Refused", error: seqTaken(item.runId, nextSeq) } as const
    return { _tag: "Appended", entry, contentKey: key } as const
  })
