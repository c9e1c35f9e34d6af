/**
 * `claimAndOwnMany`: fresh claims of many released runs at once, each the
 * `claimAndOwn` of a run nobody owns or claims, as a compare-and-swap on its
 * status and stored state, with the run's new state installed by the same
 * update. Over the row strategy the batch is one conditional `UPDATE` (the
 * rule per run is its `WHERE`, the values a `CASE` on the run id) that takes
 * the first `limit` runs still matching, in the order given; PostgreSQL skips
 * rows another writer holds (`FOR UPDATE SKIP LOCKED`) and sends it alone in
 * autocommit, with the ownership facts appended by the same statement
 * (`flows_journal_append` per moved row); SQLite runs it in one `BEGIN
 * IMMEDIATE` transaction with two statements of facts per claimed run. Over
 * another strategy each run is its own `claimAndOwn` and owned transition.
 */
import type * as JournalModule from "@baton/journal/Journal"
import { Effect, Metric, Option } from "effect"
import * as RunStoreMetrics from "../../RunStoreMetrics.js"
import * as Admission from "../Admission.js"
import * as Boundary from "../Boundary.js"
import * as Companion from "../Companion.js"
import * as Errors from "../errors.js"
import { ClaimAndOwnManyOutcome, type OwnerIdType, type ReleasedClaim, type Service } from "../model.js"
import * as ReferenceClock from "../ReferenceClock.js"
import { admit, admitReading, operation, readingAdmitted, type StoreContext } from "./context.js"
import * as Move from "./move.js"

/** Most runs one `claimAndOwnMany` takes: one statement's worth of parameters on either dialect. */
export const maxClaims = 100

const activated = ClaimAndOwnManyOutcome.Activated()
const missed = ClaimAndOwnManyOutcome.Missed()

/** The write key of a host's batch claims: batches of one host take turns; other hosts' do not wait. */
export const keyOf = (owner: OwnerIdType): string => {
  const key = `claim-next:${owner.hostId}:${owner.pid}`
  return key.length <= 1024 ? key : "claim-next"
}

const refused = (field: string, detail: string) =>
  Effect.fail(Errors.invalid("claimAndOwnMany", Boundary.refuse(field, detail)))

const admitClaims = (value: unknown) =>
  Effect.gen(function*() {
    if (!Array.isArray(value)) return yield* refused("claims", "claims must be an array")
    if (value.length > maxClaims) return yield* refused("claims", `claims must hold at most ${maxClaims} runs`)
    const seen = new Set<string>()
    const claims: Array<ReleasedClaim> = []
    for (const [i, item] of (value as ReadonlyArray<unknown>).entries()) {
      const field = `claims[${i}]`
      const fields = yield* admit(
        "claimAndOwnMany",
        Boundary.record(field, item, ["runId", "expectedStatus", "expectedState", "stateJson"], false)
      )
      const runId = yield* admit("claimAndOwnMany", Admission.runId(fields.runId, `${field}.runId`))
      if (seen.has(runId)) return yield* refused(`${field}.runId`, `${field}.runId repeats an earlier claim`)
      seen.add(runId)
      const expectedStatus = fields.expectedStatus
      if (expectedStatus !== "pending" && expectedStatus !== "suspended") {
        return yield* refused(`${field}.expectedStatus`, `${field}.expectedStatus must be "pending" or "suspended"`)
      }
      const expectedState = fields.expectedState
      if (typeof expectedState !== "string") return yield* refused(`${field}.expectedState`, `${field}.expectedState must be a string`)
      const stateJson = yield* admit("claimAndOwnMany", Boundary.jsonText(`${field}.stateJson`, fields.stateJson))
      claims.push({ runId, expectedStatus, expectedState, stateJson })
    }
    return claims
  })

export const make = (ctx: StoreContext, one: Pick<Service, "claimAndOwn" | "transitionOwned">): Pick<Service, "claimAndOwnMany"> => {
  const { sql } = ctx

  // Per run: `CASE run_id WHEN <id> THEN <value> … END` over the batch.
  const byRun = (claims: ReadonlyArray<ReleasedClaim>, value: (claim: ReleasedClaim, i: number) => unknown) =>
    sql`CASE run_id ${sql.join(" ", false)(claims.map((c, i) => sql`WHEN ${c.runId} THEN ${value(c, i)}`))} END`

  const overRows = (claims: ReadonlyArray<ReleasedClaim>, who: OwnerIdType, now: number, limit: number) =>
    Effect.gen(function*() {
      const ids = claims.map((c) => c.runId)
      const facts = [Companion.fact("claimed", who, now), Companion.fact("activated", who, now)]
      const set = sql`${Move.installOwner(ctx, who, now, now)}, waiting_reason = NULL, waiting_token = NULL,
        waiting_request = NULL, waiting_wake_at_ms = NULL, state_json = ${byRun(claims, (c) => c.stateJson)}`
      const rule = sql`status = ${byRun(claims, (c) => c.expectedStatus)} AND state_json = ${byRun(claims, (c) => c.expectedState)}
        AND owner_host_id IS NULL AND heartbeat_at_ms IS NULL AND claim_host_id IS NULL`
      // The first `limit` runs of the batch that still match, in its order.
      const picked = sql`SELECT run_id FROM flows_runs WHERE run_id IN ${sql.in(ids)} AND ${rule}
        ORDER BY ${byRun(claims, (_c, i) => sql.literal(String(i)))} LIMIT ${limit}`
      const outcomes = new Map<string, ClaimAndOwnManyOutcome>(ids.map((id) => [id, missed]))
      if (ctx.isPostgres) {
        const prepared: Array<Option.Option<JournalModule.PreparedAppend>> = []
        for (const claim of claims) prepared.push(yield* Companion.prepare(claim.runId, facts))
        const appends = claims.flatMap((c, i) => {
          const p = prepared[i]!
          return Option.isSome(p) ? [sql`WHEN ${c.runId} THEN ${p.value.expression}`] : []
        })
        const appended = appends.length === 0
          ? sql`NULL::bigint[]`
          : sql`CASE moved.run_id ${sql.join(" ", false)(appends)} END`
        // Rows another claimer holds are passed over; the update re-checks the rule on the row it locked, and
        // the reading against the database clock, as a single move's does.
        const rows = yield* ctx.writer.statement(
          sql<{ run_id: string | null; appended: unknown; reference_clock_ms: unknown }>`
          WITH locked AS MATERIALIZED (${picked} FOR UPDATE SKIP LOCKED), moved AS (
            UPDATE flows_runs SET ${set}
            WHERE run_id IN (SELECT run_id FROM locked) AND ${rule} AND ${readingAdmitted(ctx, now)} RETURNING run_id
          )
          SELECT moved.run_id, ${appended} AS appended,
            ${sql.literal(ReferenceClock.clockMillisSql)} AS reference_clock_ms
          FROM (SELECT 1) AS one LEFT JOIN moved ON true`,
          { key: keyOf(who) }
        )
        for (const row of rows) {
          if (row.run_id === null) continue
          const p = prepared[ids.indexOf(row.run_id)]
          if (p !== undefined && Option.isSome(p)) yield* p.value.appended(row.appended)
          outcomes.set(row.run_id, activated)
        }
        if (rows.every((row) => row.run_id === null)) {
          yield* ctx.clock.checkAgainst(
            { method: "claimAndOwnMany", runId: ids[0]!, nowMs: now },
            Number(rows[0]?.reference_clock_ms)
          )
        }
        return outcomes
      }
      return yield* ctx.writer.write(
        Effect.gen(function*() {
          const moved = yield* sql<{ run_id: string }>`UPDATE flows_runs SET ${set}
            WHERE run_id IN (${picked}) AND ${rule} RETURNING run_id`
          for (const { run_id } of moved) {
            const prepared = yield* Companion.prepare(run_id, facts)
            if (Option.isSome(prepared)) yield* prepared.value.append
            outcomes.set(run_id, activated)
          }
          return outcomes
        }),
        { key: keyOf(who), savepoint: false }
      )
    })

  // Another strategy is asked per run, as `claimAndOwn` asks it; the state follows as an owned transition.
  const oneByOne = (claims: ReadonlyArray<ReleasedClaim>, who: OwnerIdType, now: number, limit: number) =>
    Effect.gen(function*() {
      const outcomes = new Map<string, ClaimAndOwnManyOutcome>()
      let taken = 0
      for (const claim of claims) {
        if (taken >= limit) {
          outcomes.set(claim.runId, missed)
          continue
        }
        const outcome = yield* one.claimAndOwn(
          claim.runId,
          { status: claim.expectedStatus, owner: null, heartbeatAtMs: null },
          who,
          now
        )
        if (outcome._tag !== "Activated") {
          outcomes.set(claim.runId, missed)
          continue
        }
        const moved = yield* one.transitionOwned(claim.runId, who, "running", claim.stateJson)
        if (moved._tag === "Transitioned") taken++
        outcomes.set(claim.runId, moved._tag === "Transitioned" ? activated : missed)
      }
      return outcomes
    })

  const claimAndOwnMany = (claims: ReadonlyArray<ReleasedClaim>, owner: OwnerIdType, nowMs: number, limit?: number) =>
    operation(
      "claimAndOwnMany",
      undefined,
      Effect.gen(function*() {
        const admitted = yield* admitClaims(claims)
        const who = yield* admit("claimAndOwnMany", Admission.owner("owner", owner))
        const now = yield* admit("claimAndOwnMany", Boundary.safeNonNegative("nowMs", nowMs))
        const most = limit === undefined ? admitted.length : yield* admit("claimAndOwnMany", Boundary.safeNonNegative("limit", limit))
        if (admitted.length === 0 || most === 0) return new Map<string, ClaimAndOwnManyOutcome>()
        yield* admitReading(ctx, { method: "claimAndOwnMany", runId: admitted[0]!.runId, nowMs: now })
        yield* Effect.annotateCurrentSpan({ runs: admitted.length, ownerHostId: who.hostId })
        const outcomes = ctx.rowLeases
          ? yield* overRows(admitted, who, now, most).pipe(
            Effect.mapError((error) => Errors.fromFailure("claimAndOwnMany", error))
          )
          : yield* oneByOne(admitted, who, now, most)
        let taken = 0
        for (const outcome of outcomes.values()) if (outcome._tag === "Activated") taken++
        yield* Metric.incrementBy(RunStoreMetrics.claimAndOwnMany.Activated, taken)
        yield* Metric.incrementBy(RunStoreMetrics.claimAndOwnMany.Missed, outcomes.size - taken)
        return outcomes as ReadonlyMap<string, ClaimAndOwnManyOutcome>
      })
    )

  return { claimAndOwnMany }
}
