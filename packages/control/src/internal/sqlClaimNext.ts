/**
 * `claimNext`: a host claims the next released runs of the flows it serves: one read of the candidates
 * (a window of twice the runs wanted, so claimers racing for the same head of the queue still find
 * enough), then the run store's `claimAndOwnMany`, a compare-and-swap on each candidate's status and
 * stored state that installs its claimed summary in the same update and takes the first `limit` still
 * matching (PostgreSQL: skipping rows another claimer holds). Nothing to claim writes nothing. Only the
 * common case is taken here: the leading candidates, in claim order, up to the first whose queue has a
 * limit to check (global, or one of `exceptQueues`), recording this runtime's code; that run and
 * everything after it stay with `hostCandidates` and `resume`, one at a time, so the order holds.
 */
import * as Consensus from "@baton/journal/Consensus"
import * as RunStore from "@baton/run-store/RunStore"
import type { Fragment } from "@effect/sql/Statement"
import { Duration, Effect, Either } from "effect"
import type { CodeDrift, PersistenceError } from "../ControlError.js"
import { InvalidInput } from "../ControlError.js"
import type { ClaimedRun, ClaimNextQuery, ClaimNextResult, StoredPlan } from "../ControlRuntime.js"
import type { RunSummary } from "../ControlSchema.js"
import { released } from "./queueSql.js"
import type { SqlContext } from "./sqlContext.js"
import { fenceOf, persist } from "./sqlContext.js"
import { busyQueues, flowFilter, lapsedLease, newestLease, queueSkip, runExpressions, skipQueuesIssue } from "./sqlListing.js"
import { transitioned } from "./sqlOwnership.js"
import { type PlanRow, storedOf } from "./sqlPlans.js"
import type { RawRow, RunRow } from "./sqlRows.js"
import { runColumns, summaryOf, toRow, withLaunchedBy } from "./sqlRows.js"

const skewMs = Duration.toMillis(Consensus.heartbeatSkewAllowance)

const issue = (text: string) => Effect.fail(new InvalidInput({ issue: text }))

const checkQuery = (query: ClaimNextQuery) => {
  if (typeof query !== "object" || query === null) return issue("query: must be an object")
  if (!Array.isArray(query.flowIds) || !query.flowIds.every((f) => typeof f === "string")) {
    return issue("flowIds: must be an array of strings")
  }
  if (!Number.isSafeInteger(query.nowMs) || query.nowMs < 0) return issue("nowMs: must be a non-negative safe integer")
  if (!Number.isSafeInteger(query.limit) || query.limit < 1 || query.limit > RunStore.claimAndOwnManyMax) {
    return issue(`limit: must be an integer in 1..${RunStore.claimAndOwnManyMax}`)
  }
  if (query.exceptQueues !== undefined && (!Array.isArray(query.exceptQueues) || !query.exceptQueues.every((q) => typeof q === "string"))) {
    return issue("exceptQueues: must be an array of strings")
  }
  const skip = skipQueuesIssue(query.skipQueues)
  if (skip !== undefined) return issue(skip)
  return Effect.void
}

const nothing: ClaimNextResult = { claimed: [], leasesWaiting: false }

/** `claimNext` bound to one runtime context; `codeDrifts` is the ownership module's drift rule over a batch. */
export const makeClaimNext = (
  ctx: SqlContext,
  codeDrifts: (runs: ReadonlyArray<RunSummary>) => Effect.Effect<ReadonlyMap<string, CodeDrift>, PersistenceError>
) => {
  const { sql } = ctx
  const x = runExpressions(ctx)
  // Whether the journal's tables are here (the control runtime runs without them too): asked once.
  let journal: boolean | undefined

  const journalPresent = Effect.suspend(() =>
    journal !== undefined
      ? Effect.succeed(journal)
      : sql<{ present: unknown }>`SELECT ${
        ctx.isPostgres
          ? sql`to_regclass('flows_journal_events') IS NOT NULL`
          : sql`EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'flows_journal_events')`
      } AS present`.pipe(
        Effect.map((rows) => {
          const value = rows[0]?.present
          journal = value === true || Number(value) === 1
          return journal
        }),
        persist("claim the next runs")
      )
  )

  // The recorded code a claim here may take without asking the drift rule (which still has the last word):
  // a flow's own digest or none, and this runtime's engine or none. With a pin hook any digest may pass.
  const codeMatches = (flowIds: ReadonlyArray<string>, catalog: ReadonlyArray<{ flowId: string; executionDigest?: string | undefined }>): Fragment => {
    const digest = x.member("$.executionDigest")
    const flow = x.member("$.flowId")
    const engine = ctx.options.engineVersion === undefined
      ? sql``
      : sql`AND (${x.member("$.engineVersion")} IS NULL OR ${x.member("$.engineVersion")} = ${ctx.options.engineVersion})`
    if (ctx.options.pinnedFlow !== undefined) return engine
    const perFlow = flowIds.map((flowId) => {
      const current = catalog.find((f) => f.flowId === flowId)?.executionDigest
      return current === undefined
        ? sql`(${flow} = ${flowId} AND ${digest} IS NULL)`
        : sql`(${flow} = ${flowId} AND (${digest} IS NULL OR ${digest} = ${current}))`
    })
    return sql`AND (${sql.join(" OR ", false)(perFlow)}) ${engine}`
  }

  const select = (query: ClaimNextQuery, catalog: ReadonlyArray<{ flowId: string; executionDigest?: string | undefined }>, withJournal: boolean) => {
    // A first claim: nothing but control's own entries journaled, and no attempt (without the journal's
    // tables nothing says so).
    const seen = withJournal
      ? sql`EXISTS (SELECT 1 FROM flows_journal_events e WHERE e.run_id = r.run_id AND e.event_type NOT LIKE 'control.%') OR `
      : sql`1 = 1 OR `
    // The newest lease stamp (this host's clock check) is read only when there is something to claim.
    return sql<RawRow>`WITH ${busyQueues(ctx)}, picked AS MATERIALIZED (
        SELECT ${runColumns(ctx)},
          q.concurrency AS queue_limit,
          p.plan_id AS plan_id, p.row_seq AS plan_row_seq, p.card_json, p.decoded_input_json, p.decision,
          (CASE WHEN ${seen}EXISTS (SELECT 1 FROM flows_attempts a WHERE a.run_id = r.run_id) THEN 0 ELSE 1 END) AS never_driven
        FROM flows_runs r JOIN control_runs cr ON cr.run_id = r.run_id
          LEFT JOIN control_run_resumes rr ON rr.run_id = r.run_id
          LEFT JOIN control_queues q ON q.queue = cr.queue LEFT JOIN busy b ON b.queue = cr.queue
          LEFT JOIN control_plans p ON p.plan_id = ${x.member("$.planId")}
        WHERE ${released(sql)} AND cr.available_at_ms <= ${query.nowMs} ${queueSkip(ctx, query.skipQueues)}
          AND COALESCE(q.paused, 0) = 0 AND (q.concurrency IS NULL OR COALESCE(b.n, 0) < q.concurrency)
          ${flowFilter(ctx, query.flowIds)} ${codeMatches(query.flowIds, catalog)}
        ORDER BY cr.priority DESC, cr.available_at_ms, cr.created_seq
        LIMIT ${Math.min(RunStore.claimAndOwnManyMax, 2 * query.limit)}
      )
      SELECT picked.*,
        (CASE WHEN EXISTS (SELECT 1 FROM picked) THEN ${newestLease(ctx, query.flowIds)} END) AS newest_lease_ms,
        (CASE WHEN EXISTS (SELECT 1 FROM control_runs cr JOIN flows_runs r ON r.run_id = cr.run_id
          WHERE r.status NOT IN ('completed', 'failed', 'cancelled') ${flowFilter(ctx, query.flowIds)}
            AND ${lapsedLease(ctx, query.nowMs)}) THEN 1 ELSE 0 END) AS leases_waiting
      FROM (SELECT 1) AS one LEFT JOIN picked ON true
      ORDER BY picked.priority DESC, picked.available_at_ms, picked.created_seq`
  }

  const planOf = (raw: RawRow): Effect.Effect<StoredPlan | undefined> =>
    raw.plan_id === null || raw.plan_id === undefined
      ? Effect.succeed(undefined)
      : storedOf({
        plan_id: String(raw.plan_id),
        row_seq: Number(raw.plan_row_seq),
        card_json: String(raw.card_json),
        decoded_input_json: String(raw.decoded_input_json),
        decision: String(raw.decision)
      } satisfies PlanRow).pipe(
        // The drive reads a plan that does not decode again, and reports it there.
        Effect.orElseSucceed(() => undefined)
      )

  const claimNext = (query: ClaimNextQuery): Effect.Effect<ClaimNextResult, InvalidInput | PersistenceError> =>
    Effect.gen(function*() {
      yield* checkQuery(query)
      if (query.flowIds.length === 0) return nothing
      const catalog = yield* ctx.currentCatalog
      const withJournal = yield* journalPresent
      const rows = yield* select(query, catalog, withJournal).pipe(persist("claim the next runs"))
      const first = rows[0]
      if (first !== undefined && Number(first.leases_waiting) === 1) return { claimed: [], leasesWaiting: true }
      const newest = first?.newest_lease_ms === null || first?.newest_lease_ms === undefined
        ? undefined
        : Number(first.newest_lease_ms)
      if (newest !== undefined && newest > query.nowMs + skewMs) {
        return { claimed: [], leasesWaiting: false, newestHeartbeatAtMs: newest }
      }
      const picked: Array<{ readonly raw: RawRow; readonly row: RunRow; readonly summary: RunSummary }> = []
      const except = new Set(query.exceptQueues ?? [])
      for (const raw of rows) {
        if (raw.run_id === null || raw.run_id === undefined) continue
        // The batch ends at the first run whose queue has a limit to check: it and everything after it
        // go to the one-at-a-time path, so the order holds across both.
        if ((raw.queue_limit !== null && raw.queue_limit !== undefined) || except.has(String(raw.queue))) break
        const row = toRow(raw)
        // A summary that does not decode is left to the one-at-a-time path, which reports it.
        const summary = yield* Effect.either(summaryOf(row))
        if (Either.isRight(summary)) picked.push({ raw, row, summary: summary.right })
      }
      if (picked.length === 0) return nothing
      const drifts = yield* codeDrifts(picked.map((p) => p.summary))
      const claimant = yield* ctx.claimant
      const at = yield* ctx.now
      const fence = fenceOf(claimant)
      const claims = picked.filter((p) => !drifts.has(p.row.runId)).map((p) => ({
        ...p,
        next: transitioned({ ...p.summary, ownerId: fence }, claimant, "accepted", "running", at)
      }))
      if (claims.length === 0) return nothing
      const outcomes = yield* ctx.store.claimAndOwnMany(
        claims.map((c) => ({
          runId: c.row.runId,
          expectedStatus: c.row.status === "pending" ? "pending" as const : "suspended" as const,
          expectedState: c.row.stateJson,
          stateJson: JSON.stringify(c.next)
        })),
        claimant,
        at,
        query.limit
      ).pipe(persist("claim the next runs"))
      const claimed: Array<ClaimedRun> = []
      for (const c of claims) {
        if (outcomes.get(c.row.runId)?._tag !== "Activated") continue
        const plan = yield* planOf(c.raw)
        claimed.push({
          summary: withLaunchedBy(c.row, c.next),
          queue: String(c.raw.queue),
          fence,
          heartbeatAtMs: at,
          neverDriven: Number(c.raw.never_driven) === 1,
          ...(plan === undefined ? {} : { plan })
        })
      }
      return { claimed, leasesWaiting: false }
    })

  return { claimNext }
}
