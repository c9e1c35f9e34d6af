/**
 * Cancellation: the unfenced request, its lineage-wide form
 * and the owner's row-fenced acknowledgement. No strategy call, no fact.
 */
import { Effect } from "effect"
import * as Admission from "../Admission.js"
import * as Boundary from "../Boundary.js"
import * as Errors from "../errors.js"
import {
  isRunStatus,
  isTerminalRunStatus,
  type OwnerIdType,
  RequestCancelOutcome,
  type Service
} from "../model.js"
import { admit, operation, statement, type StoreContext, write } from "./context.js"
import { membership, roundOrder } from "./reads.js"

interface CancelState {
  readonly status: unknown
  readonly cancel_requested_at_ms: number | string | null
}

export const make = (ctx: StoreContext): Pick<Service, "requestCancel" | "requestCancelLineage" | "acknowledgeCancel"> => {
  const { sql } = ctx
  // Listing the live statuses (not excluding the settled ones) makes an undecodable status miss and decode.
  const live = sql.literal(`status IN ('pending', 'running', 'suspended')`)

  /** Folds members' states in round order into the miss outcome. */
  const classifyMiss = (method: string, runId: string, states: ReadonlyArray<CancelState>) =>
    Effect.gen(function*() {
      let outcome: RequestCancelOutcome = RequestCancelOutcome.NotFound()
      for (const state of states) {
        if (!isRunStatus(state.status)) {
          return yield* Effect.fail(Errors.decodeFailed(method, "a stored run status does not decode", {
            runId,
            stage: "row-schema"
          }))
        }
        if (isTerminalRunStatus(state.status)) {
          if (outcome._tag !== "AlreadyRequested") outcome = RequestCancelOutcome.Terminal({ status: state.status })
        } else if (state.cancel_requested_at_ms !== null) {
          outcome = RequestCancelOutcome.AlreadyRequested({ requestedAtMs: Number(state.cancel_requested_at_ms) })
        } else {
          return yield* Effect.fail(
            Errors.writeInvariant(method, runId, "a live run kept no cancellation request after the update")
          )
        }
      }
      return outcome
    })

  const requestCancel = (runId: string, nowMs: number) =>
    operation(
      "requestCancel",
      undefined,
      Effect.gen(function*() {
        const id = yield* admit("requestCancel", Admission.runId(runId))
        const now = yield* admit("requestCancel", Boundary.safeNonNegative("nowMs", nowMs))
        yield* Effect.annotateCurrentSpan({ runId: id })
        if (ctx.isPostgres) {
          // One autocommit statement; only a miss reads the row to name the outcome.
          const updated = yield* statement(
            ctx,
            "requestCancel",
            id,
            sql`UPDATE flows_runs SET cancel_requested_at_ms = ${now}
              WHERE run_id = ${id} AND cancel_requested_at_ms IS NULL AND ${live} RETURNING cancel_requested_at_ms`
          )
          if (updated.length > 0) return RequestCancelOutcome.CancelRequested({ requestedAtMs: now })
          const states = yield* Effect.mapError(
            sql<CancelState>`SELECT status, cancel_requested_at_ms FROM flows_runs WHERE run_id = ${id}`,
            (error) => Errors.fromFailure("requestCancel", error)
          )
          return yield* classifyMiss("requestCancel", id, states)
        }
        return yield* write(
          ctx,
          "requestCancel",
          id,
          Effect.gen(function*() {
            if (ctx.isPostgres) yield* sql`SELECT run_id FROM flows_runs WHERE run_id = ${id} FOR UPDATE`
            const updated = yield* sql`UPDATE flows_runs SET cancel_requested_at_ms = ${now}
              WHERE run_id = ${id} AND cancel_requested_at_ms IS NULL AND ${live} RETURNING cancel_requested_at_ms`
            if (updated.length > 0) return RequestCancelOutcome.CancelRequested({ requestedAtMs: now })
            const states = yield* sql<CancelState>`SELECT status, cancel_requested_at_ms FROM flows_runs
              WHERE run_id = ${id}`
            return yield* classifyMiss("requestCancel", id, states)
          })
        )
      })
    )

  const requestCancelLineage = (runId: string, nowMs: number) =>
    operation(
      "requestCancelLineage",
      undefined,
      Effect.gen(function*() {
        const id = yield* admit("requestCancelLineage", Admission.runId(runId))
        const now = yield* admit("requestCancelLineage", Boundary.safeNonNegative("nowMs", nowMs))
        yield* Effect.annotateCurrentSpan({ runId: id })
        // Keyed by the lineage root; SQLite ignores keys, so it skips the extra read.
        const key = ctx.isPostgres
          ? yield* Effect.mapError(
            sql<{ readonly root: string }>`SELECT COALESCE(lineage_id, run_id) AS root FROM flows_runs WHERE run_id = ${id}`,
            (error) => Errors.fromFailure("requestCancelLineage", error)
          ).pipe(Effect.map((rows) => rows[0]?.root ?? id))
          : id
        return yield* write(
          ctx,
          "requestCancelLineage",
          key,
          Effect.gen(function*() {
            if (ctx.isPostgres) {
              yield* sql`SELECT run_id FROM flows_runs WHERE ${membership(sql, id)} ORDER BY run_id FOR UPDATE`
            }
            const updated = yield* sql`UPDATE flows_runs SET cancel_requested_at_ms = ${now}
              WHERE ${membership(sql, id)} AND cancel_requested_at_ms IS NULL AND ${live}
              RETURNING run_id`
            if (updated.length > 0) return RequestCancelOutcome.CancelRequested({ requestedAtMs: now })
            const states = yield* sql<CancelState>`SELECT status, cancel_requested_at_ms FROM flows_runs
              WHERE ${membership(sql, id)} ORDER BY ${roundOrder(ctx)}`
            return yield* classifyMiss("requestCancelLineage", id, states)
          })
        )
      })
    )

  const acknowledgeCancel = (runId: string, owner: OwnerIdType, nowMs: number) =>
    operation(
      "acknowledgeCancel",
      undefined,
      Effect.gen(function*() {
        const id = yield* admit("acknowledgeCancel", Admission.runId(runId))
        const who = yield* admit("acknowledgeCancel", Admission.owner("owner", owner))
        const now = yield* admit("acknowledgeCancel", Boundary.safeNonNegative("nowMs", nowMs))
        yield* Effect.annotateCurrentSpan({ runId: id, ownerHostId: who.hostId })
        const ack = JSON.stringify({ observedAtMs: now, owner: { hostId: who.hostId, pid: who.pid, nonce: who.nonce } })
        // One conditional statement on both dialects (on PostgreSQL in autocommit): its row lock decides.
        return yield* statement(
          ctx,
          "acknowledgeCancel",
          id,
          Effect.gen(function*() {
            const rows = yield* sql`UPDATE flows_runs
              SET cancel_acknowledgement_json = COALESCE(cancel_acknowledgement_json, ${ack})
              WHERE run_id = ${id} AND status = 'running' AND cancel_requested_at_ms IS NOT NULL
                AND owner_host_id = ${who.hostId} AND owner_pid = ${who.pid} AND owner_nonce = ${who.nonce}
              RETURNING run_id`
            return rows.length > 0
          })
        )
      })
    )

  return { requestCancel, requestCancelLineage, acknowledgeCancel }
}
