/**
 * The ownership moves over the row strategy, each one `Move.run`: the rule as
 * the update's `WHERE`, the facts it states, and the loss named from the row
 * the move found (`Rows.classify`, as every claim loss is named).
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Consensus from "@baton/journal/Consensus"
import type { Fragment } from "@effect/sql/Statement"
import { Effect, Metric } from "effect"
import * as RunStoreMetrics from "../../RunStoreMetrics.js"
import * as Companion from "../Companion.js"
import {
  AbandonClaimOutcome,
  ActivateOutcome,
  ClaimAndOwnOutcome,
  ClaimOutcome,
  isTerminalRunStatus,
  type LivenessEvidence,
  type OwnerIdType,
  RecoverClaimOutcome,
  type RunSnapshot,
  type RunStatus,
  type RunStoreError,
  type StealOutcome,
  type TransitionGuard,
  TransitionOutcome
} from "../model.js"
import type * as ReferenceClock from "../ReferenceClock.js"
import * as Rows from "../rows.js"
import type { StoreContext } from "./context.js"
import * as Move from "./move.js"

/** Runs `update` once the enclosing write commits, or now when the move committed on its own. */
const whenCommitted = (update: Effect.Effect<void>) =>
  Effect.flatMap(
    DurableWriter.isInTransaction,
    (open) => open ? DurableWriter.afterCommit(update) : Effect.as(update, true)
  )

const claimable = (ctx: StoreContext) => ctx.sql`status IN ('pending', 'suspended') AND claim_host_id IS NULL`

const claimIs = (ctx: StoreContext, claimant: OwnerIdType, token: number) => Rows.claimIs(ctx.sql, claimant, token)

/** A claim by `who` at the reading (`claim`, and `steal` over a stale owner): `Claimed`, or the loss named from the row. */
const claimMove = (
  ctx: StoreContext,
  method: "claim" | "steal",
  check: ReferenceClock.ReadingCheck,
  who: OwnerIdType,
  rule: Fragment
): Effect.Effect<ClaimOutcome & StealOutcome, RunStoreError> => {
  const now = check.nowMs
  return Effect.map(
    Move.run(ctx, {
      method,
      runId: check.runId,
      check,
      set: Move.setClaim(ctx, who, now),
      rule,
      facts: [Companion.fact(method === "claim" ? "claimed" : "stolen", who, now)]
    }),
    (result) => result._tag === "Moved" ? ClaimOutcome.Claimed({ claimedAtMs: now }) : Rows.classify(result.row, now)
  )
}

export const claim = (
  ctx: StoreContext,
  check: ReferenceClock.ReadingCheck,
  snapshot: RunSnapshot,
  who: OwnerIdType
): Effect.Effect<ClaimOutcome, RunStoreError> =>
  claimMove(ctx, "claim", check, who, ctx.sql`${claimable(ctx)} AND ${Move.snapshotIs(ctx, snapshot)}`)

/**
 * Claim and activate at once. The facts follow from the expected snapshot, which the rule requires the row
 * to match: a fresh claim, a re-own of one's own stale run (released first, a new generation), or a steal.
 */
export const claimAndOwn = (
  ctx: StoreContext,
  check: ReferenceClock.ReadingCheck,
  snapshot: RunSnapshot,
  who: OwnerIdType,
  proof: LivenessEvidence | undefined
): Effect.Effect<ClaimAndOwnOutcome, RunStoreError> => {
  const now = check.nowMs
  const previous = snapshot.owner
  const facts: Array<Companion.Fact> = []
  if (previous === null) {
    facts.push(Companion.fact("claimed", who, now))
  } else if (Consensus.sameOwner(previous, who)) {
    facts.push(Companion.fact("released", who, null), Companion.fact("claimed", who, now))
  } else {
    facts.push(Companion.fact("stolen", who, now))
  }
  facts.push(Companion.fact("activated", who, now))
  const stealing = previous !== null && !Consensus.sameOwner(previous, who)
  const rule = ctx.sql`status IN ('pending', 'suspended', 'running') AND claim_host_id IS NULL
    AND ${Move.snapshotIs(ctx, snapshot)}
    AND (status <> 'running' OR ${Move.staleAt(ctx, "heartbeat_at_ms", now)})`
  // A steal whose evidence the strategy would refuse never writes: the loss is named from the row.
  const refused = stealing && (proof === undefined || !Consensus.stealEvidenceValid(who, now, proof))
  return Effect.map(
    Move.run(ctx, {
      method: "claimAndOwn",
      runId: check.runId,
      check,
      set: Move.installOwner(ctx, who, now, now),
      rule: refused ? ctx.sql`1 = 0` : rule,
      facts
    }),
    (result) => result._tag === "Moved" ? ClaimAndOwnOutcome.Activated() : Rows.classify(result.row, now)
  )
}

/** Activate one's claim; a claim whose snapshot moved on is released (a second move, on the losing path only). */
export const activate = (
  ctx: StoreContext,
  check: ReferenceClock.ReadingCheck,
  snapshot: RunSnapshot,
  who: OwnerIdType,
  token: number
): Effect.Effect<ActivateOutcome, RunStoreError> =>
  Effect.gen(function*() {
    const result = yield* Move.run(ctx, {
      method: "activate",
      runId: check.runId,
      check,
      set: Move.installOwner(ctx, who, check.nowMs, token),
      rule: ctx.sql`${claimIs(ctx, who, token)} AND ${Move.snapshotIs(ctx, snapshot)}`,
      facts: [Companion.fact("activated", who, token)]
    })
    if (result._tag === "Moved") return ActivateOutcome.Activated()
    if (result.row === undefined || !Rows.claimMatches(result.row, who, token)) return ActivateOutcome.ClaimLost()
    const released = yield* releaseClaim(ctx, "activate", check.runId, who, token)
    return released ? ActivateOutcome.SnapshotChanged() : ActivateOutcome.ClaimLost()
  })

const releaseClaim = (ctx: StoreContext, method: string, runId: string, who: OwnerIdType, token: number) =>
  Effect.map(
    Move.run(ctx, {
      method,
      runId,
      set: Move.clearClaim(ctx),
      rule: claimIs(ctx, who, token),
      facts: [Companion.fact("released", who, token)]
    }),
    (result) => result._tag === "Moved"
  )

export const abandonClaim = (
  ctx: StoreContext,
  runId: string,
  who: OwnerIdType,
  token: number
): Effect.Effect<AbandonClaimOutcome, RunStoreError> =>
  Effect.map(
    releaseClaim(ctx, "abandonClaim", runId, who, token),
    (released) => released ? AbandonClaimOutcome.Abandoned() : AbandonClaimOutcome.ClaimLost()
  )

export const recoverClaim = (
  ctx: StoreContext,
  check: ReferenceClock.ReadingCheck,
  stale: OwnerIdType,
  token: number
): Effect.Effect<RecoverClaimOutcome, RunStoreError> =>
  Effect.map(
    Move.run(ctx, {
      method: "recoverClaim",
      runId: check.runId,
      check,
      set: Move.clearClaim(ctx),
      rule: ctx.sql`${claimIs(ctx, stale, token)} AND ${Move.staleAt(ctx, "claimed_at_ms", check.nowMs)}`,
      facts: [Companion.fact("expired", stale, token)]
    }),
    (result) => {
      if (result._tag === "Moved") return RecoverClaimOutcome.Recovered()
      if (result.row === undefined) return RecoverClaimOutcome.NotFound()
      if (!Rows.claimMatches(result.row, stale, token)) return RecoverClaimOutcome.ClaimChanged()
      return RecoverClaimOutcome.ClaimFresh()
    }
  )

export const steal = (
  ctx: StoreContext,
  check: ReferenceClock.ReadingCheck,
  snapshot: RunSnapshot,
  who: OwnerIdType
): Effect.Effect<StealOutcome, RunStoreError> =>
  claimMove(
    ctx,
    "steal",
    check,
    who,
    ctx.sql`claim_host_id IS NULL AND heartbeat_at_ms IS NOT NULL
      AND ${Move.snapshotIs(ctx, snapshot)} AND ${Move.staleAt(ctx, "heartbeat_at_ms", check.nowMs)}`
  )

/**
 * An owned transition. Leaving `running` clears owner and claim; the common case (no foreign claim pending)
 * is one move. A row that carries another claimant's pending claim takes a second move that also states
 * that claim's release, so the facts name everyone the transition let go.
 */
export const transitionOwned = (
  ctx: StoreContext,
  runId: string,
  who: OwnerIdType,
  target: Exclude<RunStatus, "pending">,
  state: string | null,
  predicate: TransitionGuard | undefined,
  transitionedAtMs: number
): Effect.Effect<TransitionOutcome, RunStoreError> =>
  Effect.gen(function*() {
    const guard = predicate?.cancelRequested === "absent"
      ? ctx.sql`AND cancel_requested_at_ms IS NULL`
      : predicate?.cancelRequested === "present"
      ? ctx.sql`AND cancel_requested_at_ms IS NOT NULL`
      : ctx.sql``
    const owned = ctx.sql`status = 'running' AND ${Rows.ownerIs(ctx.sql, who)} ${guard}`
    const terminal = isTerminalRunStatus(target)
    const set = target === "running"
      ? ctx.sql`status = 'running', finished_at_ms = NULL, state_json = COALESCE(${state}, state_json)`
      : ctx.sql`status = ${target}, finished_at_ms = ${terminal ? transitionedAtMs : null},
        owner_host_id = NULL, owner_pid = NULL, owner_nonce = NULL, granted_at_ms = NULL, heartbeat_at_ms = NULL,
        ${Move.clearClaim(ctx)}, state_json = COALESCE(${state}, state_json)`
    const released = Companion.fact("released", who, null)
    const first = yield* Move.run(ctx, {
      method: "transitionOwned",
      runId,
      set,
      rule: target === "running"
        ? owned
        : ctx.sql`${owned} AND (claim_host_id IS NULL OR ${Rows.claimOwnerIs(ctx.sql, who)})`,
      facts: target === "running" ? [] : [released]
    })
    let result = first
    if (result._tag === "Missed" && target !== "running" && result.row !== undefined && result.row.claim !== null) {
      const pending = result.row
      result = yield* Move.run(ctx, {
        method: "transitionOwned",
        runId,
        set,
        rule: ctx.sql`${owned} AND ${Rows.claimIs(ctx.sql, pending.claim!, pending.claimedAtMs!)}`,
        facts: [Companion.fact("released", pending.claim!, pending.claimedAtMs), released]
      })
    }
    if (result._tag === "Moved") {
      if (terminal) yield* whenCommitted(Metric.increment(RunStoreMetrics.runThroughput))
      return TransitionOutcome.Transitioned()
    }
    const row = result.row
    if (row === undefined) return TransitionOutcome.NotFound()
    if (!Rows.ownedBy(row, who)) return TransitionOutcome.FenceLost()
    const requested = row.cancelRequestedAtMs !== null
    if (
      (predicate?.cancelRequested === "absent" && requested) ||
      (predicate?.cancelRequested === "present" && !requested)
    ) return TransitionOutcome.GuardFailed()
    // Owned, guard holding, yet missed: the pending claim changed between the two moves; try again.
    return yield* transitionOwned(ctx, runId, who, target, state, predicate, transitionedAtMs)
  })
