/**
 * Owner-side operations (docs/design/fencing-and-leases.md): heartbeat, reconfirm and
 * transitionOwned with its cancellation guard.
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Consensus from "@baton/journal/Consensus"
import { Clock, Effect, Metric } from "effect"
import * as RunStoreMetrics from "../../RunStoreMetrics.js"
import * as Admission from "../Admission.js"
import * as Boundary from "../Boundary.js"
import * as Companion from "../Companion.js"
import {
  HeartbeatOutcome,
  isTerminalRunStatus,
  type OwnerIdType,
  type RunStatus,
  type RunStoreError,
  type Service,
  type TransitionGuard,
  TransitionOutcome
} from "../model.js"
import * as Rows from "../rows.js"
import {
  admit,
  admitReading,
  exists,
  leaseWrite,
  lockRow,
  operation,
  readingAdmitted,
  readRowWithClock,
  statement,
  type StoreContext,
  write
} from "./context.js"
import * as RowMoves from "./rowMoves.js"

export const make = (ctx: StoreContext): Pick<Service, "heartbeat" | "reconfirm" | "transitionOwned"> => {
  /**
   * PostgreSQL over the row strategy: one conditional `UPDATE` in autocommit whose
   * predicates are the whole rule (running, this owner, no pending claim for a
   * reconfirm, the reading within the database clock's allowance, re-checked once
   * the row lock is held); only a miss reads the row and the clock again to name
   * the outcome. A miss caused only by the clock at that instant is replayed.
   */
  const renewInOneStatement = (
    method: "heartbeat" | "reconfirm",
    id: string,
    who: OwnerIdType,
    now: number,
    check: { readonly method: string; readonly runId: string; readonly nowMs: number }
  ): Effect.Effect<HeartbeatOutcome, RunStoreError> =>
    Effect.gen(function*() {
      const noClaim = method === "reconfirm" ? ctx.sql`AND claim_host_id IS NULL` : ctx.sql``
      const stored = yield* statement(
        ctx,
        method,
        id,
        ctx.sql<{ readonly heartbeat_at_ms: number | string }>`UPDATE flows_runs
          SET heartbeat_at_ms = GREATEST(heartbeat_at_ms, ${now})
          WHERE run_id = ${id} AND status = 'running' AND ${Rows.ownerIs(ctx.sql, who)} ${noClaim}
            AND ${readingAdmitted(ctx, now)}
          RETURNING heartbeat_at_ms`
      )
      const first = stored[0]
      if (first !== undefined) return HeartbeatOutcome.Updated({ heartbeatAtMs: Number(first.heartbeat_at_ms) })
      const { clockMs, row } = yield* readRowWithClock(ctx, method, id)
      yield* ctx.clock.checkAgainst(check, clockMs)
      if (row === undefined) return HeartbeatOutcome.NotFound()
      if (Rows.ownedBy(row, who) && (method === "heartbeat" || row.claim === null)) {
        return yield* renewInOneStatement(method, id, who, now, check)
      }
      return HeartbeatOutcome.FenceLost()
    })

  const renew = (method: "heartbeat" | "reconfirm") => (runId: string, owner: OwnerIdType, nowMs: number) =>
    operation(
      method,
      { base: RunStoreMetrics.heartbeats },
      Effect.gen(function*() {
        const id = yield* admit(method, Admission.runId(runId))
        const who = yield* admit(method, Admission.owner("owner", owner))
        const now = yield* admit(method, Boundary.safeNonNegative("nowMs", nowMs))
        const check = { method, runId: id, nowMs: now }
        yield* admitReading(ctx, check)
        yield* Effect.annotateCurrentSpan({ runId: id, ownerHostId: who.hostId })
        if (ctx.isPostgres && ctx.rowLeases) return yield* renewInOneStatement(method, id, who, now, check)
        return yield* leaseWrite(
          ctx,
          check,
          undefined,
          (locked) =>
            Effect.gen(function*() {
            // PostgreSQL: lock the run row before the lease row (lock order); it also tells NotFound apart.
            const row = ctx.isPostgres ? yield* locked : undefined
            const lost = Effect.map(
              ctx.isPostgres ? Effect.succeed(row !== undefined) : exists(ctx, id),
              (present): HeartbeatOutcome => present ? HeartbeatOutcome.FenceLost() : HeartbeatOutcome.NotFound()
            )
            if (ctx.isPostgres && row === undefined) return HeartbeatOutcome.NotFound()
            const renewed = yield* (method === "heartbeat"
              ? ctx.consensus.heartbeat(id, who, now)
              : ctx.consensus.reconfirm(id, who, now))
            if (renewed._tag === "Lost") return yield* lost
            // A reconfirm yields to a pending steal claim (the strategy's rule, checked on the row too).
            const noClaim = method === "reconfirm" ? ctx.sql`AND claim_host_id IS NULL` : ctx.sql``
            const stored = yield* ctx.sql<{ readonly heartbeat_at_ms: number | string }>`UPDATE flows_runs
              SET heartbeat_at_ms = ${Dialect.greatest(ctx.sql)}(heartbeat_at_ms, ${renewed.heartbeatAtMs})
              WHERE run_id = ${id} AND status = 'running' AND ${Rows.ownerIs(ctx.sql, who)} ${noClaim}
              RETURNING heartbeat_at_ms`
            const first = stored[0]
            if (first === undefined) return yield* lost
            return HeartbeatOutcome.Updated({ heartbeatAtMs: Number(first.heartbeat_at_ms) })
          })
        )
      })
    )

  const transitionOwned = (
    runId: string,
    owner: OwnerIdType,
    toStatus: RunStatus,
    stateJson?: string,
    guard?: TransitionGuard
  ) => {
    const to = typeof toStatus === "string" ? toStatus : "invalid"
    return operation(
      "transitionOwned",
      { base: RunStoreMetrics.transitions, extra: { to } },
      Effect.gen(function*() {
        const id = yield* admit("transitionOwned", Admission.runId(runId))
        const who = yield* admit("transitionOwned", Admission.owner("owner", owner))
        const target = yield* admit("transitionOwned", Admission.targetStatus(toStatus))
        const state = stateJson === undefined
          ? null
          : yield* admit("transitionOwned", Boundary.jsonText("stateJson", stateJson))
        const predicate = yield* admit("transitionOwned", Admission.guard(guard))
        yield* Effect.annotateCurrentSpan({ runId: id, ownerHostId: who.hostId, to: target })
        const transitionedAtMs = Math.floor(yield* Clock.currentTimeMillis)
        if (ctx.rowLeases) return yield* RowMoves.transitionOwned(ctx, id, who, target, state, predicate, transitionedAtMs)
        return yield* write(
          ctx,
          "transitionOwned",
          id,
          Effect.gen(function*() {
            const row = yield* lockRow(ctx, "transitionOwned", id)
            if (row === undefined) return TransitionOutcome.NotFound()
            const held = yield* ctx.consensus.guard(id, who).pipe(
              Effect.as(true),
              Effect.catchIf(
                (error: Consensus.ConsensusError) => error.code === "fence_lost",
                () => Effect.succeed(false)
              )
            )
            if (!held || !Rows.ownedBy(row, who)) return TransitionOutcome.FenceLost()
            const requested = row.cancelRequestedAtMs !== null
            if (
              (predicate?.cancelRequested === "absent" && requested) ||
              (predicate?.cancelRequested === "present" && !requested)
            ) return TransitionOutcome.GuardFailed()
            if (target === "running") {
              yield* ctx.sql`UPDATE flows_runs SET status = 'running', finished_at_ms = NULL,
                state_json = COALESCE(${state}, state_json) WHERE run_id = ${id}`
              return TransitionOutcome.Transitioned()
            }
            const terminal = isTerminalRunStatus(target)
            yield* ctx.consensus.release(id, who)
            const facts: Array<Companion.Fact> = []
            if (row.claim !== null && !Consensus.sameOwner(row.claim, who)) {
              // Keep the strategy from holding a claim the row no longer shows.
              yield* ctx.consensus.release(id, row.claim)
              facts.push(Companion.fact("released", row.claim, row.claimedAtMs))
            }
            yield* ctx.sql`UPDATE flows_runs SET status = ${target},
              finished_at_ms = ${terminal ? transitionedAtMs : null},
              owner_host_id = NULL, owner_pid = NULL, owner_nonce = NULL, granted_at_ms = NULL, heartbeat_at_ms = NULL,
              claim_host_id = NULL, claim_pid = NULL, claim_nonce = NULL, claimed_at_ms = NULL,
              state_json = COALESCE(${state}, state_json) WHERE run_id = ${id}`
            facts.push(Companion.fact("released", who, null))
            yield* Companion.appendAll(id, facts)
            if (terminal) yield* DurableWriter.afterCommit(Metric.increment(RunStoreMetrics.runThroughput))
            return TransitionOutcome.Transitioned()
          })
        )
      })
    )
  }

  return { heartbeat: renew("heartbeat"), reconfirm: renew("reconfirm"), transitionOwned }
}
