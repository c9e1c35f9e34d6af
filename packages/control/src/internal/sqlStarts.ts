/**
 * Starts without a plan decision: runs of a flow whose policy needs no approval are written with an
 * approved plan each, in one transaction for the whole batch, and either claimed for the caller's
 * executor (run by run) or created released in their queue for any host's claim (the whole batch in a
 * few multi-row statements, `sqlStartBatch`).
 */
import { Effect, Option } from "effect"
import { ApprovalRequired, ClaimLost, FlowNotFound, IdempotencyConflict, InvalidInput, PersistenceError } from "../ControlError.js"
import type { Queueing, RunResult, StartedRun, StartRequest, StoredPlan } from "../ControlRuntime.js"
import type { PlanCard, RunSummary } from "../ControlSchema.js"
import { isDurableTextOfLength, sha256, sha256InPlace, tryCanonical } from "./canonical.js"
import { buildCard, decodeInput } from "./runtimePlanning.js"
import type { SqlContext } from "./sqlContext.js"
import { persist } from "./sqlContext.js"
import { decodeRetry, placement } from "./sqlRows.js"
import { launchedSummary } from "./sqlPlans.js"
import { parseJson } from "./sqlProjection.js"
import * as QueueSql from "./queueSql.js"
import * as Batch from "./sqlStartBatch.js"
import * as Sequences from "./sqlSequences.js"

/** The most runs one start writes. */
export const maxBatch = 10_000

/** Why a queue name is refused, or `undefined`. */
export const queueIssue = (queue: unknown): string | undefined => QueueSql.nameIssue("queue", queue)

const retryIssue = (retry: StartRequest["retry"]): string | undefined => {
  if (retry === undefined) return undefined
  if (!Number.isSafeInteger(retry.maxAttempts) || retry.maxAttempts < 1 || retry.maxAttempts > 1000) {
    return "retry.maxAttempts: must be an integer from 1 to 1000"
  }
  if (!Number.isSafeInteger(retry.initialDelayMs) || retry.initialDelayMs < 0) {
    return "retry.initial: must be a finite, non-negative duration"
  }
  if (!Number.isSafeInteger(retry.maxDelayMs) || retry.maxDelayMs < retry.initialDelayMs) {
    return "retry.max: must be a finite duration no shorter than retry.initial"
  }
  if (typeof retry.factor !== "number" || !Number.isFinite(retry.factor) || retry.factor < 1 || retry.factor > 100) {
    return "retry.factor: must be a number from 1 to 100"
  }
  if (typeof retry.jitter !== "boolean") return "retry.jitter: must be a boolean"
  return undefined
}

/** Checks a start's options; the message names the field and the rule. */
const checkStart = (request: StartRequest): Effect.Effect<void, InvalidInput> => {
  const fail = (issue: string) => Effect.fail(new InvalidInput({ issue }))
  if (!Array.isArray(request.inputs)) return fail("inputs: must be an array")
  if (request.inputs.length > maxBatch) return fail(`inputs: must hold at most ${maxBatch} inputs`)
  const queue = queueIssue(request.queue)
  if (queue !== undefined) return fail(queue)
  if (!Number.isSafeInteger(request.priority) || Math.abs(request.priority) > 1_000_000) {
    return fail("priority: must be an integer from -1000000 to 1000000")
  }
  if (!Number.isSafeInteger(request.availableAtMs) || request.availableAtMs < 0) {
    return fail("availableAt: must be a non-negative safe integer of epoch milliseconds")
  }
  const retry = retryIssue(request.retry)
  if (retry !== undefined) return fail(retry)
  if (request.parentRunId !== undefined && !isDurableTextOfLength(request.parentRunId, 1024)) {
    return fail("parentRunId: must be 1 to 1024 well-formed characters")
  }
  const keys = request.idempotencyKeys
  if (keys !== undefined) {
    if (!Array.isArray(keys) || keys.length !== request.inputs.length) {
      return fail("idempotencyKeys: must hold one entry per input")
    }
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]
      if (key !== undefined && !isDurableTextOfLength(key, 1024)) {
        return fail(`${keys.length === 1 ? "idempotencyKey" : `idempotencyKeys[${i}]`}: must be 1 to 1024 well-formed characters`)
      }
    }
  }
  return Effect.void
}

/**
 * What an idempotency key binds: the flow, the decoded input and, when any differs from its default,
 * the run's placement (queue, priority, retry policy, parent). The availability time is left out, so
 * a caller that retries a start with the same `delay` after a crash still gets its run.
 */
const startBinding = (flowId: string, decoded: unknown, request: StartRequest): unknown => {
  const placed = request.queue !== "default" || request.priority !== 0 || request.retry !== undefined ||
    request.parentRunId !== undefined
  if (!placed) return { flowId, input: decoded }
  return {
    flowId,
    input: decoded,
    placement: {
      queue: request.queue,
      priority: request.priority,
      ...(request.retry === undefined ? {} : { retry: request.retry }),
      ...(request.parentRunId === undefined ? {} : { parentRunId: request.parentRunId })
    }
  }
}

interface Admitted {
  readonly index: number
  readonly decoded: unknown
  readonly fingerprint: string
  readonly key: string | undefined
}

/** The reserved step key under which the node engine records a run's end. */
const resultDigest = sha256("step:$result")

/** Starts bound to one runtime context. */
export const makeStarts = (
  ctx: SqlContext,
  readPlan: (planId: string) => Effect.Effect<StoredPlan | undefined, PersistenceError>,
  readRun: (runId: string) => Effect.Effect<RunSummary, import("../ControlError.js").RunNotFound | PersistenceError>
) => {
  const { sql } = ctx

  const readKeys = (keys: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const found = new Map<string, { readonly fingerprint: string; readonly runId: string }>()
      for (let i = 0; i < keys.length; i += 500) {
        const chunk = keys.slice(i, i + 500)
        const rows = yield* sql<{ idempotency_key: string; fingerprint: string; run_id: string }>`SELECT idempotency_key,
          fingerprint, run_id FROM control_start_keys WHERE idempotency_key IN ${sql.in(chunk)}`
        for (const row of rows) found.set(row.idempotency_key, { fingerprint: row.fingerprint, runId: row.run_id })
      }
      return found
    })

  const existing = (runId: string): Effect.Effect<StartedRun, PersistenceError | import("../ControlError.js").RunNotFound> =>
    Effect.gen(function*() {
      const run = yield* readRun(runId)
      const plan = run.planId === undefined ? undefined : yield* readPlan(run.planId)
      if (plan === undefined) {
        return yield* Effect.fail(new PersistenceError({ operation: "start runs", message: `run ${runId} has no plan` }))
      }
      return { run, plan, created: false, handed: false }
    })

  const attempt = (request: StartRequest) =>
    Effect.gen(function*() {
      yield* checkStart(request)
      const flows = yield* ctx.catalog
      const flow = flows.find((f) => f.flowId === request.flowId)
      if (flow === undefined) return yield* Effect.fail(new FlowNotFound({ flowId: request.flowId }))
      if (flow.approval === "required") return yield* Effect.fail(new ApprovalRequired({ flowId: flow.flowId }))
      if (request.parentRunId !== undefined) {
        const parent = yield* sql<{ run_id: string }>`SELECT run_id FROM flows_runs WHERE run_id = ${request.parentRunId}`.pipe(
          persist("start runs")
        )
        if (parent.length === 0) return yield* Effect.fail(new InvalidInput({ issue: "parentRunId: names no run" }))
      }
      const many = request.inputs.length !== 1
      // Every input is decoded before anything is written: one bad input refuses the whole batch.
      const admitted = yield* Effect.forEach(request.inputs, (input, index) =>
        Effect.gen(function*() {
          const decoded = yield* decodeInput(flow, input).pipe(
            Effect.mapError((e) => many ? new InvalidInput({ issue: `inputs[${index}].${e.issue}` }) : e)
          )
          const bound = tryCanonical(startBinding(flow.flowId, decoded, request))
          if (!bound.ok) {
            // The issue is named from the input itself (`input.s`, `inputs[3].s`), not from the pair.
            const own = tryCanonical(decoded, many ? `inputs[${index}]` : "input")
            return yield* Effect.fail(new InvalidInput({ issue: own.ok ? bound.issue : own.issue }))
          }
          return { index, decoded, fingerprint: bound.text, key: request.idempotencyKeys?.[index] } satisfies Admitted
        }))
      const keyField = (index: number) => many ? `idempotencyKeys[${index}]` : "idempotencyKey"
      const keyed = admitted.flatMap((a) => a.key === undefined ? [] : [a.key])
      const held = keyed.length === 0 ? new Map() : yield* readKeys(keyed).pipe(persist("read start keys"))
      // Within the batch a repeated key with the same input answers the first; with another, it conflicts.
      const firstOfKey = new Map<string, Admitted>()
      const fresh: Array<Admitted> = []
      for (const item of admitted) {
        if (item.key === undefined) {
          fresh.push(item)
          continue
        }
        const holder = held.get(item.key)
        const earlier = firstOfKey.get(item.key)
        const fingerprint = holder?.fingerprint ?? earlier?.fingerprint
        if (fingerprint !== undefined && fingerprint !== item.fingerprint) {
          return yield* Effect.fail(new IdempotencyConflict({ field: keyField(item.index) }))
        }
        if (holder === undefined && earlier === undefined) {
          firstOfKey.set(item.key, item)
          fresh.push(item)
        }
      }
      // A paused or limited queue admits runs only through a claim that checks it, so none is handed.
      const gated = yield* sql<{ paused: number | string | boolean; concurrency: number | string | null }>`SELECT paused,
        concurrency FROM control_queues WHERE queue = ${request.queue}`.pipe(persist("start runs"))
      const open = gated.length === 0 || (Number(gated[0]!.paused) !== 1 && gated[0]!.concurrency === null)
      const hand = request.hand && open && request.availableAtMs <= (yield* ctx.now)
      // PostgreSQL numbers come from sequences before the write, so the write is keyed by its first run.
      const early = ctx.isPostgres
        ? yield* Effect.all([
          Sequences.nextMany(ctx, "plan", fresh.length),
          Sequences.nextMany(ctx, "run", fresh.length)
        ]).pipe(persist("start runs"))
        : undefined
      const retryJson = request.retry === undefined ? null : JSON.stringify(request.retry)
      const written = fresh.length === 0 ? [] : yield* ctx.write(
        early === undefined ? undefined : `run-${early[1][0]}`,
        "start runs",
        Effect.gen(function*() {
          const [planSeqs, runSeqs] = early ?? (yield* Effect.all([
            Sequences.nextMany(ctx, "plan", fresh.length),
            Sequences.nextMany(ctx, "run", fresh.length)
          ]))
          const at = yield* ctx.now
          if (!hand) {
            const items = yield* Effect.forEach(fresh, (item, i) =>
              Effect.map(
                buildCard(flow, { flowId: flow.flowId, input: item.decoded }, item.decoded, `plan-${planSeqs[i]}`, sha256InPlace),
                (card): Batch.Item => ({ ...item, card, runId: `run-${runSeqs[i]}`, createdSeq: runSeqs[i]! })
              ))
            const out = yield* Batch.writeReleased(ctx, request, items, at, keyField)
            // Hosts listening on PostgreSQL look for work when this commits (the payload names the schema).
            if (ctx.isPostgres) yield* sql`SELECT pg_notify(${QueueSql.workChannel}, current_schema())`
            return out
          }
          const out: Array<StartedRun & { readonly key: string | undefined }> = []
          for (let i = 0; i < fresh.length; i++) {
            const item = fresh[i]!
            const planId = `plan-${planSeqs[i]}`
            const runId = `run-${runSeqs[i]}`
            const card: PlanCard = yield* buildCard(flow, { flowId: flow.flowId, input: item.decoded }, item.decoded, planId)
            const decision = { _tag: "Approved" as const, decisionPrincipal: request.principal, decidedAt: at, scope: "once" as const }
            const rowSeq = yield* Sequences.value(ctx, "plan_row")
            yield* sql`INSERT INTO control_plans (plan_id, row_seq, card_json, decoded_input_json, decision)
              VALUES (${planId}, ${rowSeq}, ${JSON.stringify(card)}, ${JSON.stringify(item.decoded ?? null)}, 'approved')`
            yield* sql`INSERT INTO control_tokens (target_tag, run_id, target_id, token_id, target_json, resolved,
                decision_principal_json, decision_json)
              VALUES ('Plan', '', ${planId}, ${planId}, ${JSON.stringify(card.approval.target)}, 1,
                ${JSON.stringify(request.principal)}, ${JSON.stringify(decision)})`
            if (item.key !== undefined) {
              const claimed = yield* sql<{ run_id: string }>`INSERT INTO control_start_keys (idempotency_key, fingerprint, run_id)
                VALUES (${item.key}, ${item.fingerprint}, ${runId}) ON CONFLICT (idempotency_key) DO NOTHING RETURNING run_id`
              if (claimed.length === 0) {
                const [holder] = yield* sql<{ fingerprint: string }>`SELECT fingerprint FROM control_start_keys
                  WHERE idempotency_key = ${item.key}`
                if (holder !== undefined && holder.fingerprint !== item.fingerprint) {
                  return yield* Effect.fail(new IdempotencyConflict({ field: keyField(item.index) }))
                }
                return yield* Effect.fail(new Batch.Raced())
              }
            }
            const claimant = yield* ctx.claimant
            const summary = launchedSummary(ctx, card, runId, claimant, at, request.parentRunId)
            yield* ctx.store.create(
              runId,
              JSON.stringify(summary),
              request.parentRunId === undefined ? undefined : { parentRunId: request.parentRunId }
            )
            yield* sql`INSERT INTO control_runs (run_id, created_seq, principal_id, principal_kind, queue, priority,
                available_at_ms, retry_json, attempt)
              VALUES (${runId}, ${runSeqs[i]!}, ${request.principal.id}, ${request.principal.kind}, ${request.queue},
                ${request.priority}, ${Math.max(request.availableAtMs, at)}, ${retryJson}, 1)`
            // Handed: the caller's executor drives the run under this claim at once.
            const owned = yield* ctx.store.claimAndOwn(runId, { status: "pending", owner: null, heartbeatAtMs: null }, claimant, at)
            if (owned._tag !== "Activated") return yield* Effect.fail(new ClaimLost({ runId, reason: owned._tag }))
            out.push({
              run: {
                ...summary,
                launchedBy: { id: request.principal.id, kind: request.principal.kind },
                ...placement(request.queue, request.priority, Math.max(request.availableAtMs, at), 1, request.retry?.maxAttempts)
              },
              plan: { card, decodedInput: item.decoded, decision: "approved" },
              created: true,
              handed: true,
              key: item.key
            })
          }
          return out
        })
      )
      const byKey = new Map(written.flatMap((w) => (w.key === undefined ? [] : [[w.key, w] as const])))
      const freshIndex = new Map(fresh.map((item, i) => [item.index, written[i]!] as const))
      return yield* Effect.forEach(admitted, (item): Effect.Effect<StartedRun, PersistenceError | import("../ControlError.js").RunNotFound> => {
        const mine = freshIndex.get(item.index)
        if (mine !== undefined) return Effect.succeed({ run: mine.run, plan: mine.plan, created: true, handed: mine.handed })
        const sameBatch = item.key === undefined ? undefined : byKey.get(item.key)
        if (sameBatch !== undefined) return Effect.succeed({ run: sameBatch.run, plan: sameBatch.plan, created: false, handed: false })
        return existing(held.get(item.key!)!.runId)
      })
    })

  const start = (request: StartRequest) =>
    attempt(request).pipe(
      // Once: the racing start has committed by now, so its key is read on the second pass.
      Effect.catchIf((e): e is Batch.Raced => e instanceof Batch.Raced, () => attempt(request)),
      Effect.catchIf((e): e is Batch.Raced => e instanceof Batch.Raced, () =>
        Effect.fail(new PersistenceError({ operation: "start runs", message: "an idempotency key kept racing" }))),
      Effect.catchTag("RunNotFound", (e) =>
        Effect.fail(new PersistenceError({ operation: "start runs", message: `start key names run ${e.runId}, which is absent` })))
    )

  const runResult = (runId: string): Effect.Effect<RunResult | undefined, PersistenceError> =>
    Effect.gen(function*() {
      const digest = yield* resultDigest
      const [row] = yield* sql<{ state: string; outcome_json: string | null; error_json: string | null }>`SELECT state,
        outcome_json, error_json FROM flows_attempts WHERE run_id = ${runId} AND step_key_digest = ${digest}
        ORDER BY attempt DESC LIMIT 1`.pipe(persist("read a run's result"))
      if (row === undefined) return undefined
      if (row.state === "completed") {
        const outcome = parseJson(row.outcome_json)
        const value = typeof outcome === "object" && outcome !== null && "value" in outcome ? outcome.value : undefined
        return value === undefined ? { _tag: "Completed" } : { _tag: "Completed", value }
      }
      if (row.state === "failed") return { _tag: "Failed", error: parseJson(row.error_json) ?? null }
      return undefined
    })

  const queueing = (runId: string): Effect.Effect<Queueing | undefined, PersistenceError> =>
    Effect.map(
      sql<{ queue: string; attempt: number | string; retry_json: string | null }>`SELECT queue, attempt, retry_json
        FROM control_runs WHERE run_id = ${runId}`.pipe(persist("read a run's queue")),
      ([row]) => {
        if (row === undefined) return undefined
        // A policy that no longer reads is no policy: the run fails rather than retrying blind.
        const retry = row.retry_json === null ? undefined : Option.getOrUndefined(decodeRetry(row.retry_json))
        return { queue: row.queue, attempt: Number(row.attempt), retry }
      }
    )

  return { start, runResult, queueing }
}
