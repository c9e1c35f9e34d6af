/**
 * The facade's `list`: flows by offset, plans by row sequence, runs by
 * keyset cursor bound to the filters and order that produced it.
 */
import { Effect, Schema } from "effect"
import * as ControlError from "../ControlError.js"
import type * as ControlRuntime from "../ControlRuntime.js"
import * as ControlSchema from "../ControlSchema.js"
import { canonical } from "./canonical.js"
import { admit } from "./facadeBoundary.js"
import { displayCard } from "./facadeDisplay.js"
import * as Inputs from "./facadeInputs.js"
import { planAfterIssue } from "./runtimeChecks.js"

const invalid = (issue: string) => new ControlError.InvalidInput({ issue })

const limitOf = (raw: unknown): Effect.Effect<number, ControlError.InvalidInput> => {
  const limit = typeof raw === "object" && raw !== null && "limit" in raw ? raw.limit : undefined
  if (limit === undefined) return Effect.succeed(ControlSchema.defaultPageSize)
  if (typeof limit === "number" && Number.isSafeInteger(limit) && limit >= 1 && limit <= ControlSchema.maxPageSize) {
    return Effect.succeed(limit)
  }
  return Effect.fail(invalid(`limit: must be an integer between 1 and 500, received ${String(limit)}`))
}

const offsetCursor = (cursor: string | undefined): Effect.Effect<number, ControlError.InvalidInput> => {
  if (cursor === undefined) return Effect.succeed(0)
  if (/^(0|[1-9][0-9]*)$/.test(cursor) && Number.isSafeInteger(Number(cursor))) return Effect.succeed(Number(cursor))
  return Effect.fail(invalid(`cursor: must be a cursor this listing returned, received ${JSON.stringify(cursor)}`))
}

const forgedCursor = (cursor: string) =>
  Effect.fail(invalid(`cursor: must be a cursor this listing returned, received ${JSON.stringify(cursor)}`))

const RunCursorText = Schema.parseJson(Schema.Struct({
  version: Schema.Literal(2),
  filters: Schema.String,
  rowSeq: Schema.NonNegativeInt,
  runId: Schema.String
}))
const decodeRunCursor = Schema.decodeUnknownEither(RunCursorText)
type RunCursorFields = typeof RunCursorText.Type

// What encoding through `RunCursorText` writes (its members in declaration order, as JSON), without the
// schema's interpreter: every page with a next page hands one out, from values the listing produced.
const encodeRunCursor = (cursor: RunCursorFields): string =>
  JSON.stringify({ version: cursor.version, filters: cursor.filters, rowSeq: cursor.rowSeq, runId: cursor.runId })

type RunFilters = ControlSchema.RunListFilters

const matches = ControlSchema.matchesRunFilters

/** Serves one `list` request over the runtime; `decorate` adds facade views (code drift) to a page's run items. */
export const list = (
  runtime: ControlRuntime.Service,
  decorate: (summaries: ReadonlyArray<ControlSchema.RunSummary>) => Effect.Effect<ReadonlyArray<ControlSchema.RunSummary>>,
  raw: ControlSchema.ListRequest
): Effect.Effect<ControlSchema.ListResponse, ControlError.ControlError> =>
  Effect.gen(function*() {
    const limit = yield* limitOf(raw)
    const request: ControlSchema.ListRequest = yield* admit("list", Inputs.ListRequest, raw)
    switch (request._tag) {
      case "flows": {
        const offset = yield* offsetCursor(request.cursor)
        const flows = yield* runtime.listFlows
        // A page that ends at the end has no cursor, so a genuine one always points inside the list.
        if (request.cursor !== undefined && offset >= flows.length) return yield* forgedCursor(request.cursor)
        const items = flows.slice(offset, offset + limit).map((flow) => ({ flowId: flow.flowId, description: flow.description }))
        const end = offset + items.length
        return {
          _tag: "flows" as const,
          items,
          ...(end < flows.length && items.length > 0 ? { nextCursor: String(end) } : {})
        }
      }
      case "plans": {
        const after = request.cursor === undefined ? undefined : yield* offsetCursor(request.cursor)
        // A plans cursor names the last plan row a page listed; row sequences start at 1, so "0" was
        // never handed out (the runtime reads `after: 0` as the start).
        if (after === 0) return yield* forgedCursor(request.cursor!)
        const page = yield* runtime.queryPlans({
          ...(request.filters?.flowId !== undefined ? { flowId: request.filters.flowId } : {}),
          ...(request.filters?.decision !== undefined ? { decision: request.filters.decision } : {}),
          ...(after !== undefined ? { after } : {}),
          limit
        }).pipe(Effect.catchIf(
          (error) => error._tag === "InvalidInput" && error.issue === planAfterIssue && request.cursor !== undefined,
          () => forgedCursor(request.cursor!)
        ))
        return {
          _tag: "plans" as const,
          items: page.plans.map((plan) =>
            "readable" in plan
              ? plan
              : {
                card: displayCard(plan.card),
                input: (plan.decodedInput ?? null) as ControlSchema.Json,
                decision: plan.decision
              }
          ),
          ...(page.next !== undefined ? { nextCursor: String(page.next) } : {})
        }
      }
      case "runs": {
        const filters: RunFilters = request.filters ?? {}
        if (filters.runId !== undefined) {
          // Read as a listing of one, so an unreadable row is listed flagged as on any other page.
          const page = yield* runtime.queryRuns({ filters: { runIds: [filters.runId] }, limit: 1 })
          const found = page.items[0]
          const items = found !== undefined && matches(found, filters) ? yield* decorate([found]) : []
          return { _tag: "runs" as const, items }
        }
        const fingerprint = canonical({ filters, order: request.order ?? "oldest" })
        let cursor: ControlRuntime.RunCursor | undefined
        if (request.cursor !== undefined) {
          const decoded = decodeRunCursor(request.cursor)
          if (decoded._tag === "Left") return yield* invalid("cursor: expected a run listing cursor")
          if (decoded.right.filters !== fingerprint) return yield* invalid("cursor: belongs to different run filters")
          cursor = { rowSeq: decoded.right.rowSeq, runId: decoded.right.runId }
        }
        const page = yield* runtime.queryRuns({
          filters: {
            ...(filters.flowId !== undefined ? { flowId: filters.flowId } : {}),
            ...(filters.status !== undefined ? { status: filters.status } : {}),
            ...(filters.terminal !== undefined ? { terminal: filters.terminal } : {}),
            ...(filters.parentRunId !== undefined ? { parentRunId: filters.parentRunId } : {}),
            ...(filters.lineageId !== undefined ? { lineageId: filters.lineageId } : {}),
            ...(filters.since !== undefined ? { since: filters.since } : {}),
            ...(filters.until !== undefined ? { until: filters.until } : {}),
            ...(filters.principalId !== undefined ? { launchedBy: { id: filters.principalId } } : {}),
            ...(filters.queue !== undefined ? { queue: filters.queue } : {})
          },
          ...(request.order !== undefined ? { order: request.order } : {}),
          ...(cursor !== undefined ? { cursor } : {}),
          limit
        })
        const items = yield* decorate(page.items)
        return {
          _tag: "runs" as const,
          items,
          ...(page.nextCursor !== undefined
            ? {
              nextCursor: encodeRunCursor({
                version: 2,
                filters: fingerprint,
                rowSeq: page.nextCursor.rowSeq,
                runId: page.nextCursor.runId
              })
            }
            : {})
        }
      }
    }
  })
