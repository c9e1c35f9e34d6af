/**
 * Plans and launches over `control_plans`, `control_plan_keys`, `control_tokens` and `control_runs`
 * (docs/design/control.md).
 */
import { Effect, Either } from "effect"
import { ClaimLost, FlowNotFound, InvalidInput, PersistenceError, PlanDenied, PlanNotFound } from "../ControlError.js"
import type { Envelope, PlanCard as PlanCardType, Principal, RunSummary } from "../ControlSchema.js"
import { PlanCard, PlanDecision } from "../ControlSchema.js"
import type { IdPage, IdPageRequest, LaunchResult, OwnerIdentity, PlanInput, PlanOutcome, PlanPage, PlanQuery, StoredPlan, UnreadablePlan } from "../ControlRuntime.js"
import { isDurableTextOfLength } from "./canonical.js"
import { checkLimit, checkOrdinal, checkTarget, planAfterIssue } from "./runtimeChecks.js"
import { buildCard, checkPlanInput, decodeInput, planFingerprint, planKeyConflict } from "./runtimePlanning.js"
import type { SqlContext } from "./sqlContext.js"
import { placement } from "./sqlRows.js"
import { fenceOf, persist } from "./sqlContext.js"
import * as Sequences from "./sqlSequences.js"
import { corrupt, decoder } from "./storedValue.js"

/** A `control_plans` row as read. */
export interface PlanRow {
  readonly plan_id: string
  readonly row_seq: number
  readonly card_json: string
  readonly decoded_input_json: string
  readonly decision: string
}

const decodeCard = decoder(PlanCard, "control_plans.card_json", { json: true })
const decodeDecision = decoder(PlanDecision, "control_plans.decision")

/** Decode a stored plan row; a corrupt card, decision or input fails `PersistenceError`. */
export const storedOf = (row: PlanRow): Effect.Effect<StoredPlan, PersistenceError> => {
  const subject = `plan ${row.plan_id}`
  const card = decodeCard(row.card_json, subject)
  if (Either.isLeft(card)) return Effect.fail(card.left)
  const decision = decodeDecision(row.decision, subject)
  if (Either.isLeft(decision)) return Effect.fail(decision.left)
  let decodedInput: unknown
  try {
    decodedInput = JSON.parse(row.decoded_input_json)
  } catch {
    return Effect.fail(corrupt("control_plans.decoded_input_json", subject, "is not JSON"))
  }
  return Effect.succeed({ card: card.right, decodedInput, decision: decision.right })
}

/** The `flowId` member of a stored card that does not decode, when it is still a string. */
const rawFlowOf = (cardJson: string): string | undefined => {
  try {
    const value: unknown = JSON.parse(cardJson)
    const flowId = typeof value === "object" && value !== null ? (value as { flowId?: unknown }).flowId : undefined
    return typeof flowId === "string" ? flowId : undefined
  } catch {
    return undefined
  }
}

/** The summary of a run just launched from `card`, owned by `claimant` (epoch ms `at`). */
export const launchedSummary = (
  ctx: SqlContext,
  card: PlanCardType,
  runId: string,
  claimant: OwnerIdentity,
  at: number,
  parentRunId?: string
): RunSummary => {
  const deadline = card.envelope.budget.deadline
  return {
    runId,
    flowId: card.flowId,
    status: "accepted",
    planId: card.planId,
    planDigest: card.digest,
    ...(card.executionDigest === undefined ? {} : { executionDigest: card.executionDigest }),
    ...(ctx.options.engineVersion === undefined ? {} : { engineVersion: ctx.options.engineVersion }),
    ownerId: fenceOf(claimant),
    ...(deadline === undefined ? {} : { deadlineAt: at + deadline }),
    ...(parentRunId === undefined ? {} : { parentRunId }),
    createdAt: at,
    updatedAt: at
  }
}

/** Plan operations bound to one runtime context. */
export const makePlans = (ctx: SqlContext) => {
  const { sql } = ctx

  const readPlan = (planId: string) =>
    sql<PlanRow>`SELECT plan_id, row_seq, card_json, decoded_input_json, decision FROM control_plans WHERE plan_id = ${planId}`.pipe(
      persist("read a plan"),
      Effect.flatMap((rows) => (rows[0] === undefined ? Effect.succeed(undefined) : storedOf(rows[0])))
    )

  const getPlan = (planId: string) =>
    Effect.flatMap(readPlan(planId), (plan) => (plan === undefined ? Effect.fail(new PlanNotFound({ planId })) : Effect.succeed(plan)))

  const readKey = (key: string) =>
    sql<{ fingerprint: string; plan_id: string }>`SELECT fingerprint, plan_id FROM control_plan_keys WHERE idempotency_key = ${key}`.pipe(
      Effect.map((rows) => rows[0])
    )

  const plan = (input: PlanInput): Effect.Effect<PlanOutcome, FlowNotFound | import("../ControlError.js").InvalidInput | PersistenceError> =>
    Effect.gen(function*() {
      yield* checkPlanInput(input)
      const flows = yield* ctx.catalog
      const flow = flows.find((f) => f.flowId === input.flowId)
      if (flow === undefined) return yield* Effect.fail(new FlowNotFound({ flowId: input.flowId }))
      const fingerprint = yield* planFingerprint(input)
      const key = input.idempotencyKey
      if (key !== undefined) {
        const holder = yield* readKey(key).pipe(persist("read a plan key"))
        if (holder !== undefined) {
          if (holder.fingerprint !== fingerprint) return yield* Effect.fail(planKeyConflict(key))
          const stored = yield* readPlan(holder.plan_id)
          if (stored !== undefined) return { card: stored.card, created: false }
        }
      }
      const decoded = yield* decodeInput(flow, input.input)
      // `nextval` commits on its own and never waits; SQLite counts plan ids in a write of their own.
      const planId = `plan-${yield* (ctx.isPostgres
        ? Sequences.next(ctx, "plan").pipe(persist("allocate a plan id"))
        : ctx.write(undefined, "allocate a plan id", Sequences.next(ctx, "plan")))}`
      const card = yield* buildCard(flow, input, decoded, planId)
      const decodedText = JSON.stringify(decoded ?? null)
      const outcome = yield* ctx.write(
        undefined,
        "create a plan",
        Effect.gen(function*() {
          if (key !== undefined) {
            yield* sql`INSERT INTO control_plan_keys (idempotency_key, fingerprint, plan_id)
              VALUES (${key}, ${fingerprint}, ${planId}) ON CONFLICT (idempotency_key) DO NOTHING`
            const holder = yield* readKey(key)
            if (holder === undefined || holder.plan_id !== planId) return { raced: holder } as const
          }
          const rowSeq = yield* Sequences.value(ctx, "plan_row")
          yield* sql`INSERT INTO control_plans (plan_id, row_seq, card_json, decoded_input_json, decision)
            VALUES (${planId}, ${rowSeq}, ${JSON.stringify(card)}, ${decodedText}, 'pending')`
          yield* sql`INSERT INTO control_tokens (target_tag, run_id, target_id, token_id, target_json, resolved,
              decision_principal_json, decision_json)
            VALUES ('Plan', '', ${planId}, ${planId}, ${JSON.stringify(card.approval.target)}, 0, NULL, NULL)`
          return { raced: undefined, created: true } as const
        })
      )
      if (!("created" in outcome)) {
        const holder = outcome.raced
        if (holder === undefined || holder.fingerprint !== fingerprint) return yield* Effect.fail(planKeyConflict(key!))
        const stored = yield* readPlan(holder.plan_id)
        if (stored === undefined) {
          return yield* Effect.fail(
            new PersistenceError({ operation: "plan", message: `plan key ${key} names plan ${holder.plan_id}, which is absent` })
          )
        }
        return { card: stored.card, created: false }
      }
      return { card, created: true }
    })

  const pagePlanIds = (request: IdPageRequest): Effect.Effect<IdPage, import("../ControlError.js").InvalidInput | PersistenceError> =>
    Effect.gen(function*() {
      const limit = yield* checkLimit(request.limit)
      const after = (yield* checkOrdinal("after", request.after)) ?? 0
      const given = yield* checkOrdinal("through", request.through)
      const through = given ?? (ctx.isPostgres
        ? yield* Sequences.settled(ctx, "page plan ids", "plan_row")
        : Number(
          (yield* sql<{ m: number | null }>`SELECT MAX(row_seq) AS m FROM control_plans`.pipe(persist("page plan ids")))[0]?.m ?? 0
        ))
      const rows = yield* sql<{ plan_id: string; row_seq: number }>`SELECT plan_id, row_seq FROM control_plans
        WHERE row_seq > ${after} AND row_seq <= ${through} ORDER BY row_seq LIMIT ${limit + 1}`.pipe(persist("page plan ids"))
      const page = rows.slice(0, limit)
      return {
        ids: page.map((r) => r.plan_id),
        through,
        ...(rows.length > limit ? { next: Number(page.at(-1)!.row_seq) } : {})
      }
    })

  const queryPlans = (query: PlanQuery): Effect.Effect<PlanPage, InvalidInput | PersistenceError> =>
    Effect.gen(function*() {
      const limit = yield* checkLimit(query.limit)
      let after = (yield* checkOrdinal("after", query.after)) ?? 0
      // A page continues after a plan row it scanned: an `after` naming no plan row is forged (plans are
      // never deleted), and would silently skip plans. One primary-key-unique lookup.
      if (after > 0) {
        const named = yield* sql<{ row_seq: number }>`SELECT row_seq FROM control_plans WHERE row_seq = ${after}`.pipe(
          persist("query plans")
        )
        if (named.length === 0) return yield* Effect.fail(new InvalidInput({ issue: planAfterIssue }))
      }
      // PostgreSQL numbers plan rows without a shared row: read only below a settled number, so the
      // cursor handed out never passes a plan whose write is still open.
      const bound = ctx.isPostgres ? yield* Sequences.settled(ctx, "query plans", "plan_row") : undefined
      const plans: Array<StoredPlan | UnreadablePlan> = []
      let lastScanned = after
      let more = true
      while (plans.length < limit && more) {
        const rows = yield* sql<PlanRow>`SELECT plan_id, row_seq, card_json, decoded_input_json, decision FROM control_plans
          WHERE row_seq > ${after} ${bound === undefined ? sql`` : sql`AND row_seq <= ${bound}`}
            ${query.decision === undefined ? sql`` : sql`AND decision = ${query.decision}`}
          ORDER BY row_seq LIMIT 200`.pipe(persist("query plans"))
        // More may follow when the batch was full or the page filled before the batch's end.
        more = rows.length === 200
        for (let i = 0; i < rows.length; i++) {
          const row = rows[i]!
          lastScanned = Number(row.row_seq)
          const read = yield* Effect.either(storedOf(row))
          if (Either.isLeft(read)) {
            // One unreadable row never fails the page: it is listed flagged, filtered by what its card
            // still says (its flow member, when that reads).
            if (query.flowId !== undefined && rawFlowOf(row.card_json) !== query.flowId) continue
            const decision = decodeDecision(row.decision, `plan ${row.plan_id}`)
            plans.push({
              planId: String(row.plan_id),
              ...(Either.isRight(decision) ? { decision: decision.right } : {}),
              readable: false,
              issue: read.left.message
            })
          } else {
            if (query.flowId !== undefined && read.right.card.flowId !== query.flowId) continue
            plans.push(read.right)
          }
          if (plans.length === limit) {
            more = more || i < rows.length - 1
            break
          }
        }
        after = lastScanned
      }
      return { plans, ...(more ? { next: lastScanned } : {}) }
    })

  const launch = (
    planId: string,
    digest: string,
    envelope: Envelope,
    principal?: Principal,
    reservedRunId?: string
  ): Effect.Effect<LaunchResult, PlanNotFound | PlanDenied | import("../ControlError.js").PlanDigestMismatch | import("../ControlError.js").EnvelopeMismatch | ClaimLost | PersistenceError> =>
    Effect.gen(function*() {
      const stored = yield* getPlan(planId)
      yield* checkTarget(planId, stored.card.approval.target, { _tag: "Plan", planId, digest, envelope })
      if (stored.decision === "pending") {
        return {
          _tag: "Parked",
          receipt: { _tag: "Parked", receiptId: `launch:${planId}`, planId, status: "waiting-approval" }
        } as const
      }
      if (stored.decision === "denied") return yield* Effect.fail(new PlanDenied({ planId }))
      const claimant = yield* ctx.claimant
      const card = stored.card
      // PostgreSQL: `nextval` needs no write, so the run id is known first and the launch is a write keyed
      // by it, sharing no lock with launches of other runs. SQLite counts inside the write.
      const early = ctx.isPostgres ? yield* Sequences.next(ctx, "run").pipe(persist("launch a run")) : undefined
      const run = yield* ctx.write(
        // An id no lock key can carry is left for the run store to refuse, under the schema-wide lock.
        early === undefined || (reservedRunId !== undefined && !isDurableTextOfLength(reservedRunId, 1024))
          ? undefined
          : reservedRunId ?? `run-${early}`,
        "launch a run",
        Effect.gen(function*() {
          const seq = early ?? (yield* Sequences.next(ctx, "run"))
          const runId = reservedRunId ?? `run-${seq}`
          const at = yield* ctx.now
          const summary = launchedSummary(ctx, card, runId, claimant, at)
          yield* ctx.store.create(runId, JSON.stringify(summary))
          yield* sql`INSERT INTO control_runs (run_id, created_seq, principal_id, principal_kind)
            VALUES (${runId}, ${seq}, ${principal?.id ?? null}, ${principal?.kind ?? null})`
          const outcome = yield* ctx.store.claimAndOwn(runId, { status: "pending", owner: null, heartbeatAtMs: null }, claimant, at)
          if (outcome._tag !== "Activated") return yield* Effect.fail(new ClaimLost({ runId, reason: outcome._tag }))
          return summary
        })
      )
      return {
        _tag: "Started",
        receipt: { _tag: "Accepted", receiptId: `launch:${planId}:${run.runId}`, runId: run.runId },
        // A launch places the run in the default queue, available at once, attempt 1 (the columns' defaults).
        run: {
          ...run,
          ...(principal === undefined ? {} : { launchedBy: { id: principal.id, kind: principal.kind } }),
          ...placement("default", 0, 0, 1, undefined)
        }
      } as const
    })

  const listFlows = Effect.map(ctx.catalog, (flows) => flows.map((f) => ({ flowId: f.flowId, description: f.description })))

  return { plan, getPlan, pagePlanIds, queryPlans, launch, listFlows }
}
