/**
 * Cancel attribution: who cancelled a run, and why, including cancels that
 * cascaded from an ancestor. Pure: callers gather the evidence, `attribute`
 * never queries anything.
 *
 * @since 0.1.0
 */
import type * as ControlSchema from "./ControlSchema.js"

/**
 * Journal event type of an attributed cancel request (written by the facade).
 *
 * @since 0.1.0
 * @category constants
 */
export const requestedEventType = "control.run.cancel-requested" as const

/**
 * Journal event type an engine or host writes when it settles an interrupted
 * run; counted as cancel evidence only when its `outcome` is `cancelled`.
 *
 * @since 0.1.0
 * @category constants
 */
export const interruptedEventType = "flows.engine.interrupted" as const

/**
 * An attributed cancel request: `requestedAt` in epoch milliseconds (the
 * entry's `emitted_at_ms`), the requesting principal and reason when recorded.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  readonly requestedAt: number
  readonly principal?: ControlSchema.Principal | undefined
  readonly reason?: string | undefined
}

/**
 * Cancel evidence for one run: `parentRunId` links it to its parent,
 * `cancelRequestedAt` is the store's `cancel_requested_at_ms` and
 * `cancelledAt` an engine interruption time (epoch milliseconds).
 *
 * @since 0.1.0
 * @category models
 */
export interface Evidence {
  readonly runId: string
  readonly parentRunId?: string | undefined
  readonly cancelRequestedAt?: number | undefined
  readonly cancelledAt?: number | undefined
}

/**
 * The evidence of a scope of runs (ancestors included) and the first
 * attributed request per run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Input {
  readonly runs: ReadonlyArray<Evidence>
  readonly requests: ReadonlyMap<string, Request>
}

/**
 * Attributes every cancelled-evidenced run of the input (one with a
 * `cancelRequestedAt`, a `cancelledAt` or a request):
 *
 * - its own request → `source: "control"` with that principal and reason;
 * - else, walking `parentRunId` upward (cycles stop the walk, as does an
 *   ancestor missing from the input), the nearest evidenced ancestor is
 *   `cascadedFrom`, and the nearest ancestor with a request lends its
 *   principal and reason → `source: "cascade"`;
 * - no evidenced ancestor → `source: "engine"`, no principal.
 *
 * `requestedAt` is the run's own request time, else its `cancelRequestedAt`,
 * else its `cancelledAt`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const attribute = (input: Input): ReadonlyMap<string, ControlSchema.Cancellation> => {
  const byId = new Map<string, Evidence>()
  for (const run of input.runs) {
    if (!byId.has(run.runId)) byId.set(run.runId, run)
  }
  const evidenced = (run: Evidence): boolean =>
    run.cancelRequestedAt !== undefined || run.cancelledAt !== undefined || input.requests.has(run.runId)

  const result = new Map<string, ControlSchema.Cancellation>()
  for (const run of byId.values()) {
    if (!evidenced(run)) continue
    const own = input.requests.get(run.runId)
    const requestedAt = own?.requestedAt ?? run.cancelRequestedAt ?? run.cancelledAt ?? 0
    if (own !== undefined) {
      result.set(run.runId, withOptional({ requestedAt, source: "control" }, own.principal, own.reason, undefined))
      continue
    }
    let cascadedFrom: string | undefined
    let lender: Request | undefined
    const visited = new Set<string>([run.runId])
    let parentId = run.parentRunId
    while (parentId !== undefined && !visited.has(parentId)) {
      visited.add(parentId)
      const parent = byId.get(parentId)
      if (parent === undefined) break
      if (cascadedFrom === undefined && evidenced(parent)) cascadedFrom = parent.runId
      const request = input.requests.get(parent.runId)
      if (request !== undefined) {
        lender = request
        break
      }
      parentId = parent.parentRunId
    }
    if (cascadedFrom === undefined) {
      result.set(run.runId, { requestedAt, source: "engine" })
      continue
    }
    result.set(run.runId, withOptional({ requestedAt, source: "cascade" }, lender?.principal, lender?.reason, cascadedFrom))
  }
  return result
}

const withOptional = (
  base: { readonly requestedAt: number; readonly source: ControlSchema.CancelSource },
  principal: ControlSchema.Principal | undefined,
  reason: string | undefined,
  cascadedFrom: string | undefined
): ControlSchema.Cancellation => ({
  ...base,
  ...(principal !== undefined ? { principal } : {}),
  ...(reason !== undefined ? { reason } : {}),
  ...(cascadedFrom !== undefined ? { cascadedFrom } : {})
})
