/**
 * Cancel evidence read from journal entries by the SQL runtime's projections: the first attributed
 * request per run and the first engine interruption that settled a run `cancelled`.
 */
import { Either, Schema } from "effect"
import * as Cancellation from "../Cancellation.js"
import type { PersistenceError } from "../ControlError.js"
import { Principal as PrincipalSchema } from "../ControlSchema.js"
import { corrupt, decoder } from "./storedValue.js"

/** One journal entry as either runtime reads it (payload already parsed; `undefined` when it is not JSON). */
export interface EvidenceEntry {
  readonly runId: string
  readonly eventType: string
  readonly payload: unknown
  readonly emittedAtMs: number
}

/** The journal event types `collect` reads. */
export const evidenceEventTypes = [Cancellation.requestedEventType, Cancellation.interruptedEventType] as const

const column = "flows_journal_events.payload_json"
const decodeRequest = decoder(
  Schema.Struct({ principal: Schema.optional(PrincipalSchema), reason: Schema.optional(Schema.String) }),
  column
)
const decodeInterruption = decoder(
  Schema.Struct({ outcome: Schema.optional(Schema.String), interruptedAtMs: Schema.optional(Schema.NonNegativeInt) }),
  column
)

/**
 * Requests and interruption times of `entries`, which must be in journal order per run: a later request
 * for a run that already has one is ignored (the first wins), and so is a later interruption. An entry
 * whose payload does not decode (a principal that is not one, a time that is not a number, text that is
 * not JSON) is never silently skipped: its run gets the decoding failure in `issues` (the first per run).
 */
export const collect = (entries: Iterable<EvidenceEntry>): {
  readonly requests: Map<string, Cancellation.Request>
  readonly cancelledAt: Map<string, number>
  readonly issues: Map<string, PersistenceError>
} => {
  const requests = new Map<string, Cancellation.Request>()
  const cancelledAt = new Map<string, number>()
  const issues = new Map<string, PersistenceError>()
  for (const entry of entries) {
    const subject = `run ${entry.runId}`
    const fail = (error: PersistenceError) => {
      if (!issues.has(entry.runId)) issues.set(entry.runId, error)
    }
    if (entry.eventType === Cancellation.requestedEventType && !requests.has(entry.runId)) {
      if (entry.payload === undefined) {
        fail(corrupt(column, subject, "is not JSON"))
        continue
      }
      const decoded = decodeRequest(entry.payload, subject)
      if (Either.isLeft(decoded)) {
        fail(decoded.left)
        continue
      }
      const { principal, reason } = decoded.right
      requests.set(entry.runId, {
        requestedAt: entry.emittedAtMs,
        ...(principal === undefined ? {} : { principal }),
        ...(reason === undefined ? {} : { reason })
      })
    } else if (entry.eventType === Cancellation.interruptedEventType && !cancelledAt.has(entry.runId)) {
      if (entry.payload === undefined) {
        fail(corrupt(column, subject, "is not JSON"))
        continue
      }
      const decoded = decodeInterruption(entry.payload, subject)
      if (Either.isLeft(decoded)) {
        fail(decoded.left)
        continue
      }
      if (decoded.right.outcome === "cancelled") {
        cancelledAt.set(entry.runId, decoded.right.interruptedAtMs ?? entry.emittedAtMs)
      }
    }
  }
  return { requests, cancelledAt, issues }
}
