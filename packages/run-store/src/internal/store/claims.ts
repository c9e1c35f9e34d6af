/**
 * The claim family: claim, claimAndOwn, activate, abandonClaim, recoverClaim
 * and steal. Each is one move (`move.ts`): its rule is the `WHERE` of one
 * conditional update, a loss is named from the row the move found. Over a
 * strategy other than the row's, the strategy is asked from the locked row as
 * before (`legacy`).
 */
import * as Consensus from "@baton/journal/Consensus"
import { Clock, Effect, Metric, Option } from "effect"
import * as RunStoreMetrics from "../../RunStoreMetrics.js"
import * as Admission from "../Admission.js"
import * as Boundary from "../Boundary.js"
import * as Companion from "../Companion.js"
import * as Errors from "../errors.js"
import {
  AbandonClaimOutcome,
  ActivateOutcome,
  ClaimAndOwnOutcome,
  ClaimOutcome,
  type LivenessEvidence,
  type OwnerIdType,
  RecoverClaimOutcome,
  type RunSnapshot,
  type Service,
  StealOutcome
} from "../model.js"
import * as Rows from "../rows.js"
import { admit, admitReading, leaseWrite, lockRow, operation, readRow, type StoreContext, write } from "./context.js"
import * as Move from "./move.js"
import * as RowMoves from "./rowMoves.js"

const op = (name: string) => ({ base: Metric.tagged(RunStoreMetrics.claims, "op", name) })

const setClaim = (ctx: StoreContext, runId: string, claimant: OwnerIdType, claimedAtMs: number) =>
  ctx.sql`UPDATE flows_runs SET ${Move.setClaim(ctx, claimant, claimedAtMs)} WHERE run_id = ${runId}`

const clearClaim = (ctx: StoreContext, runId: string, claimant: OwnerIdType, claimedAtMs: number) =>
  ctx.sql<{ readonly run_id: string }>`UPDATE flows_runs SET ${Move.clearClaim(ctx)}
    WHERE run_id = ${runId} AND ${Rows.claimIs(ctx.sql, claimant, claimedAtMs)} RETURNING run_id`

/** Installs `owner` with generation `grantedAtMs` on the row (claim columns cleared): the activation. */
const installOwner = (ctx: StoreContext, runId: string, owner: OwnerIdType, atMs: number, grantedAtMs: number) =>
  ctx.sql`UPDATE flows_runs SET ${Move.installOwner(ctx, owner, atMs, grantedAtMs)} WHERE run_id = ${runId}`

const nowMsOf = (method: string, value: unknown) => admit(method, Boundary.safeNonNegative("nowMs", value))

export const make = (ctx: StoreContext): Pick<
  Service,
  "claim" | "claimAndOwn" | "activate" | "abandonClaim" | "recoverClaim" | "steal"
> => {
  const claim = (runId: string, expected: RunSnapshot, claimant: OwnerIdType, nowMs: number) =>
    operation(
      "claim",
      op("claim"),
      Effect.gen(function*() {
        const id = yield* admit("claim", Admission.runId(runId))
        const snapshot = yield* admit("claim", Admission.snapshot("expected", expected))
        const who = yield* admit("claim", Admission.owner("claimant", claimant))
        const now = yield* nowMsOf("claim", nowMs)
        const check = { method: "claim", runId: id, nowMs: now }
        yield* admitReading(ctx, check)
        yield* Effect.annotateCurrentSpan({ runId: id, claimantHostId: who.hostId })
        if (ctx.rowLeases) return yield* RowMoves.claim(ctx, check, snapshot, who)
        return yield* leaseWrite(
          ctx,
          check,
          undefined,
          (locked) =>
            Effect.gen(function*() {
            const row = yield* locked
            if (
              row === undefined || (row.status !== "pending" && row.status !== "suspended") ||
              !Rows.snapshotMatches(row, snapshot) || row.claim !== null
            ) return Rows.classify(row, now)
            const grant = yield* ctx.consensus.claim(id, who, now)
            if (grant._tag === "Rejected") return Rows.classify(row, now)
            yield* setClaim(ctx, id, who, grant.grantedAtMs)
            yield* Companion.appendAll(id, [Companion.fact("claimed", who, grant.grantedAtMs)])
            return ClaimOutcome.Claimed({ claimedAtMs: grant.grantedAtMs })
          })
        )
      })
    )

  const claimAndOwn = (
    runId: string,
    expected: RunSnapshot,
    owner: OwnerIdType,
    nowMs: number,
    evidence?: LivenessEvidence
  ) =>
    operation(
      "claimAndOwn",
      op("claim_and_own"),
      Effect.gen(function*() {
        const id = yield* admit("claimAndOwn", Admission.runId(runId))
        const snapshot = yield* admit("claimAndOwn", Admission.snapshot("expected", expected))
        const who = yield* admit("claimAndOwn", Admission.owner("owner", owner))
        const now = yield* nowMsOf("claimAndOwn", nowMs)
        const check = { method: "claimAndOwn", runId: id, nowMs: now }
        yield* admitReading(ctx, check)
        const proof = evidence === undefined
          ? undefined
          : yield* admit("claimAndOwn", Admission.evidence("evidence", evidence))
        yield* Effect.annotateCurrentSpan({ runId: id, ownerHostId: who.hostId })
        const previous = snapshot.owner
        const needsEvidence = snapshot.status === "running" && previous !== null &&
          !Consensus.sameOwner(previous, who) &&
          (proof === undefined || !Consensus.matchesEvidence(previous, who, now, proof))
        // Without matching evidence no takeover can succeed: answer from a plain read.
        const preCheck = needsEvidence
          ? Effect.map(readRow(ctx, "claimAndOwn", id), (row): Option.Option<ClaimAndOwnOutcome> => {
            const loss = Rows.classify(row, now)
            return Option.some(
              loss._tag === "SnapshotChanged" && row !== undefined && Rows.snapshotMatches(row, snapshot)
                ? ClaimAndOwnOutcome.EvidenceRequired()
                : loss
            )
          })
          : undefined
        if (ctx.rowLeases) {
          const early = preCheck === undefined
            ? Option.none()
            : yield* Effect.mapError(preCheck, (error) => Errors.fromFailure("claimAndOwn", error))
          if (Option.isSome(early)) return early.value
          return yield* RowMoves.claimAndOwn(ctx, check, snapshot, who, proof)
        }
        return yield* leaseWrite(
          ctx,
          check,
          preCheck,
          (locked) =>
            Effect.gen(function*() {
            const row = yield* locked
            if (
              row === undefined || !(row.status === "pending" || row.status === "suspended" || row.status === "running") ||
              !Rows.snapshotMatches(row, snapshot) || row.claim !== null ||
              (row.status === "running" && !Rows.isStale(row.heartbeatAtMs, now))
            ) return Rows.classify(row, now)
            const facts: Array<Companion.Fact> = []
            let transition: "claimed" | "stolen" = "claimed"
            let grant: Consensus.ClaimOutcome
            if (previous === null) {
              grant = yield* ctx.consensus.claim(id, who, now)
            } else if (Consensus.sameOwner(previous, who)) {
              // Re-owning one's own stale run: a fresh generation. The release stands even if the claim then loses.
              yield* ctx.consensus.release(id, who)
              facts.push(Companion.fact("released", who, null))
              grant = yield* ctx.consensus.claim(id, who, now)
            } else {
              transition = "stolen"
              grant = yield* ctx.consensus.steal(id, who, now, proof!)
            }
            if (grant._tag === "Rejected") {
              yield* Companion.appendAll(id, facts)
              return Rows.classify(row, now)
            }
            const activation = yield* ctx.consensus.activate(id, who, grant.grantedAtMs, now)
            if (activation._tag === "Lost") {
              yield* ctx.consensus.release(id, who)
              yield* Companion.appendAll(id, facts)
              return Rows.classify(row, now)
            }
            yield* installOwner(ctx, id, who, now, grant.grantedAtMs)
            facts.push(
              Companion.fact(transition, who, grant.grantedAtMs),
              Companion.fact("activated", who, grant.grantedAtMs)
            )
            yield* Companion.appendAll(id, facts)
            return ClaimAndOwnOutcome.Activated()
          })
        )
      })
    )

  const activate = (runId: string, claimant: OwnerIdType, claimedAtMs: number, expected: RunSnapshot) =>
    operation(
      "activate",
      op("activate"),
      Effect.gen(function*() {
        const id = yield* admit("activate", Admission.runId(runId))
        const who = yield* admit("activate", Admission.owner("claimant", claimant))
        const token = yield* admit("activate", Boundary.safeNonNegative("claimedAtMs", claimedAtMs))
        const snapshot = yield* admit("activate", Admission.snapshot("expected", expected))
        yield* Effect.annotateCurrentSpan({ runId: id, claimantHostId: who.hostId })
        const activatedAtMs = Math.floor(yield* Clock.currentTimeMillis)
        // The activation stamp is a lease reading like any other: bounded by the reference clock (on
        // PostgreSQL the database clock), so a host whose Clock runs ahead cannot pin the lease into the future.
        const check = {
          method: "activate",
          runId: id,
          nowMs: activatedAtMs,
          field: "activatedAtMs (this host's Clock)",
          extra: { claimedAtMs: token }
        }
        yield* admitReading(ctx, check)
        if (ctx.rowLeases) return yield* RowMoves.activate(ctx, check, snapshot, who, token)
        return yield* leaseWrite(
          ctx,
          check,
          undefined,
          (locked) =>
            Effect.gen(function*() {
            const row = yield* locked
            if (row === undefined || !Rows.claimMatches(row, who, token)) return ActivateOutcome.ClaimLost()
            if (!Rows.snapshotMatches(row, snapshot)) {
              yield* ctx.consensus.release(id, who)
              yield* clearClaim(ctx, id, who, token)
              yield* Companion.appendAll(id, [Companion.fact("released", who, token)])
              return ActivateOutcome.SnapshotChanged()
            }
            const activation = yield* ctx.consensus.activate(id, who, token, activatedAtMs)
            if (activation._tag === "Lost") {
              yield* clearClaim(ctx, id, who, token)
              return ActivateOutcome.ClaimLost()
            }
            yield* installOwner(ctx, id, who, activatedAtMs, token)
            yield* Companion.appendAll(id, [Companion.fact("activated", who, token)])
            return ActivateOutcome.Activated()
          })
        )
      })
    )

  const abandonClaim = (runId: string, claimant: OwnerIdType, claimedAtMs: number) =>
    operation(
      "abandonClaim",
      op("abandon_claim"),
      Effect.gen(function*() {
        const id = yield* admit("abandonClaim", Admission.runId(runId))
        const who = yield* admit("abandonClaim", Admission.owner("claimant", claimant))
        const token = yield* admit("abandonClaim", Boundary.safeNonNegative("claimedAtMs", claimedAtMs))
        yield* Effect.annotateCurrentSpan({ runId: id, claimantHostId: who.hostId })
        if (ctx.rowLeases) return yield* RowMoves.abandonClaim(ctx, id, who, token)
        return yield* write(
          ctx,
          "abandonClaim",
          id,
          Effect.gen(function*() {
            if (ctx.isPostgres) yield* lockRow(ctx, "abandonClaim", id)
            const cleared = yield* clearClaim(ctx, id, who, token)
            if (cleared.length === 0) return AbandonClaimOutcome.ClaimLost()
            yield* ctx.consensus.release(id, who)
            yield* Companion.appendAll(id, [Companion.fact("released", who, token)])
            return AbandonClaimOutcome.Abandoned()
          })
        )
      })
    )

  const recoverClaim = (
    runId: string,
    staleClaimant: OwnerIdType,
    claimedAtMs: number,
    observer: OwnerIdType,
    nowMs: number,
    evidence: LivenessEvidence
  ) =>
    operation(
      "recoverClaim",
      op("recover_claim"),
      Effect.gen(function*() {
        const id = yield* admit("recoverClaim", Admission.runId(runId))
        const stale = yield* admit("recoverClaim", Admission.owner("staleClaimant", staleClaimant))
        const token = yield* admit("recoverClaim", Boundary.safeNonNegative("claimedAtMs", claimedAtMs))
        const who = yield* admit("recoverClaim", Admission.owner("observer", observer))
        const now = yield* nowMsOf("recoverClaim", nowMs)
        const check = { method: "recoverClaim", runId: id, nowMs: now, extra: { claimedAtMs: token } }
        yield* admitReading(ctx, check)
        const proof = yield* admit("recoverClaim", Admission.evidence("evidence", evidence))
        yield* Effect.annotateCurrentSpan({ runId: id, observerHostId: who.hostId })
        const preCheck = Effect.succeed(
          Consensus.matchesEvidence(stale, who, now, proof)
            ? Option.none()
            : Option.some<RecoverClaimOutcome>(RecoverClaimOutcome.LivenessUnconfirmed())
        )
        if (ctx.rowLeases) {
          const early = yield* preCheck
          if (Option.isSome(early)) return early.value
          return yield* RowMoves.recoverClaim(ctx, check, stale, token)
        }
        return yield* leaseWrite(
          ctx,
          check,
          preCheck,
          (locked) =>
            Effect.gen(function*() {
            const row = yield* locked
            if (row === undefined) return RecoverClaimOutcome.NotFound()
            if (!Rows.claimMatches(row, stale, token)) return RecoverClaimOutcome.ClaimChanged()
            if (!Rows.isStale(token, now)) return RecoverClaimOutcome.ClaimFresh()
            const recovered = yield* ctx.consensus.recover(id, stale, token, who, now, proof)
            if (recovered._tag === "Rejected") return RecoverClaimOutcome.ClaimChanged()
            yield* clearClaim(ctx, id, stale, token)
            yield* Companion.appendAll(id, [Companion.fact("expired", stale, token)])
            return RecoverClaimOutcome.Recovered()
          })
        )
      })
    )

  const steal = (
    runId: string,
    expected: RunSnapshot,
    claimant: OwnerIdType,
    nowMs: number,
    evidence: LivenessEvidence
  ) =>
    operation(
      "steal",
      op("steal"),
      Effect.gen(function*() {
        const id = yield* admit("steal", Admission.runId(runId))
        const snapshot = yield* admit("steal", Admission.snapshot("expected", expected))
        const who = yield* admit("steal", Admission.owner("claimant", claimant))
        const now = yield* nowMsOf("steal", nowMs)
        const check = { method: "steal", runId: id, nowMs: now }
        yield* admitReading(ctx, check)
        const proof = yield* admit("steal", Admission.evidence("evidence", evidence))
        yield* Effect.annotateCurrentSpan({ runId: id, claimantHostId: who.hostId })
        // Evidence naming the claimant itself proves nothing: a self-claim would make `abandonClaim` (and a
        // lost activation) release the ownership the row still records, wedging the run.
        const matched = snapshot.status === "running" && snapshot.owner !== null &&
          !Consensus.sameOwner(snapshot.owner, who) && Consensus.matchesEvidence(snapshot.owner, who, now, proof)
        const preCheck = Effect.succeed(
          matched ? Option.none() : Option.some<StealOutcome>(StealOutcome.LivenessUnconfirmed())
        )
        if (ctx.rowLeases) {
          const early = yield* preCheck
          if (Option.isSome(early)) return early.value
          // The strategy's own check of the evidence: a refusal writes nothing and is named from the row.
          if (!Consensus.stealEvidenceValid(who, now, proof)) {
            const row = yield* Effect.mapError(readRow(ctx, "steal", id), (error) => Errors.fromFailure("steal", error))
            return Rows.classify(row, now)
          }
          return yield* RowMoves.steal(ctx, check, snapshot, who)
        }
        return yield* leaseWrite(
          ctx,
          check,
          preCheck,
          (locked) =>
            Effect.gen(function*() {
            const row = yield* locked
            if (
              row === undefined || !Rows.snapshotMatches(row, snapshot) || row.claim !== null ||
              row.heartbeatAtMs === null || !Rows.isStale(row.heartbeatAtMs, now)
            ) return Rows.classify(row, now)
            const grant = yield* ctx.consensus.steal(id, who, now, proof)
            if (grant._tag === "Rejected") return Rows.classify(row, now)
            yield* setClaim(ctx, id, who, grant.grantedAtMs)
            yield* Companion.appendAll(id, [Companion.fact("stolen", who, grant.grantedAtMs)])
            return StealOutcome.Claimed({ claimedAtMs: grant.grantedAtMs })
          })
        )
      })
    )

  return { claim, claimAndOwn, activate, abandonClaim, recoverClaim, steal }
}
