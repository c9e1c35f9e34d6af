/**
 * Cancel evidence read from journal entries (§11.3), shared by both runtimes: the first attributed
 * request per run and the first engine interruption that settled a run `cancelled`.
 */
import * as Cancellation from "../Cancellation.js"
import type { Principal } from "../ControlSchema.js"

/** One journal entry as either runtime reads it (payload already parsed; `undefined` when it is not JSON). */
export interface EvidenceEntry {
  readonly runId: string
  readonly eventType: string
  readonly payload: unknown
  readonly emittedAtMs: number
}

/** The journal event types `collect` reads. */
export const evidenceEventTypes = [Cancellation.requestedEventType, Cancellation.interruptedEventType] as const

const principalOf = (value: unknown): Principal | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const { id, kind, stampedAt } = value as Record<string, unknown>
  return typeof id === "string" && typeof kind === "string" && typeof stampedAt === "number" ? { id, kind, stampedAt } : undefined
}

/**
 * Requests and interruption times of `entries`, which must be in journal order per run: a later request
 * for a run that already has one is ignored (the first wins), and so is a later interruption.
 */
export const collect = (entries: Iterable<EvidenceEntry>): {
  readonly requests: Map<string, Cancellation.Request>
  readonly cancelledAt: Map<string, number>
} => {
  const requests = new Map<string, Cancellation.Request>()
  const cancelledAt = new Map<string, number>()
  for (const entry of entries) {
    const payload = typeof entry.payload === "object" && entry.payload !== null
      ? entry.payload as Record<string, unknown>
      : undefined
    if (entry.eventType === Cancellation.requestedEventType && !requests.has(entry.runId)) {
      const principal = principalOf(payload?.principal)
      const reason = typeof payload?.reason === "string" ? payload.reason : undefined
      requests.set(entry.runId, {
        requestedAt: entry.emittedAtMs,
        ...(principal === undefined ? {} : { principal }),
        ...(reason === undefined ? {} : { reason })
      })
    } else if (
      entry.eventType === Cancellation.interruptedEventType && payload?.outcome === "cancelled" &&
      !cancelledAt.has(entry.runId)
    ) {
      cancelledAt.set(entry.runId, typeof payload.interruptedAtMs === "number" ? payload.interruptedAtMs : entry.emittedAtMs)
    }
  }
  return { requests, cancelledAt }
}
