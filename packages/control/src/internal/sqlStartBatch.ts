/**
 * The write of starts that wait in their queue (none handed to an executor): every table's rows in
 * multi-row `INSERT`s of at most {@link chunkSize} runs, and the runs created already released through
 * the run store's `createReleased`, so a batch costs a few statements per chunk rather than several per
 * run. Rows travel as array parameters on PostgreSQL (`unnest`) and as one JSON parameter on SQLite
 * (`json_each`), so the statement text is the same for every chunk and no bound-parameter limit applies.
 */
import type * as Journal from "@baton/journal/Journal"
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"
import { IdempotencyConflict } from "../ControlError.js"
import type { StartedRun, StartRequest } from "../ControlRuntime.js"
import type { PlanCard, RunSummary } from "../ControlSchema.js"
import type { SqlContext } from "./sqlContext.js"
import { placement } from "./sqlRows.js"
import { persist } from "./sqlContext.js"
import { launchedSummary } from "./sqlPlans.js"
import * as Sequences from "./sqlSequences.js"

/** Most runs one statement of the batch writes. */
export const chunkSize = 1000

/** A concurrent start with the same key and input committed first: start again to answer its run. */
export class Raced {
  readonly _tag = "Raced"
}

/** One run of the batch: its card (plan id included), decoded input and start key. */
export interface Item {
  readonly index: number
  readonly decoded: unknown
  readonly fingerprint: string
  readonly key: string | undefined
  readonly card: PlanCard
  readonly runId: string
  readonly createdSeq: number
}

const chunksOf = <A>(items: ReadonlyArray<A>): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += chunkSize) out.push(items.slice(i, i + chunkSize))
  return out
}

/** Writes `items` released in their queue; answers them in order with their key. */
export const writeReleased = (
  ctx: SqlContext,
  request: StartRequest,
  items: ReadonlyArray<Item>,
  at: number,
  keyField: (index: number) => string
) =>
  Effect.gen(function*() {
    const { sql } = ctx
    const pg = ctx.isPostgres
    const json = (rows: ReadonlyArray<ReadonlyArray<unknown>>) => JSON.stringify(rows)

    // Start keys first: a key another start holds fails the batch before anything else is written.
    const keyed = items.filter((item) => item.key !== undefined)
    for (const chunk of chunksOf(keyed)) {
      const claimed = pg
        ? yield* sql<{ idempotency_key: string }>`INSERT INTO control_start_keys (idempotency_key, fingerprint, run_id)
          SELECT * FROM unnest(${chunk.map((i) => i.key!)}::text[], ${chunk.map((i) => i.fingerprint)}::text[],
            ${chunk.map((i) => i.runId)}::text[])
          ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key`
        : yield* sql<{ idempotency_key: string }>`INSERT INTO control_start_keys (idempotency_key, fingerprint, run_id)
          SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2
          FROM json_each(${json(chunk.map((i) => [i.key, i.fingerprint, i.runId]))}) AS j WHERE true
          ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key`
      if (claimed.length === chunk.length) continue
      const won = new Set(claimed.map((row) => row.idempotency_key))
      const lost = chunk.filter((item) => !won.has(item.key!))
      const holders = yield* sql<{ idempotency_key: string; fingerprint: string }>`SELECT idempotency_key, fingerprint
        FROM control_start_keys WHERE idempotency_key IN ${sql.in(lost.map((item) => item.key!))}`
      const held = new Map(holders.map((row) => [row.idempotency_key, row.fingerprint]))
      const conflict = lost.find((item) => {
        const fingerprint = held.get(item.key!)
        return fingerprint !== undefined && fingerprint !== item.fingerprint
      })
      if (conflict !== undefined) return yield* Effect.fail(new IdempotencyConflict({ field: keyField(conflict.index) }))
      return yield* Effect.fail(new Raced())
    }

    for (const chunk of chunksOf(items)) {
      const cards = chunk.map((item) => JSON.stringify(item.card))
      const inputs = chunk.map((item) => JSON.stringify(item.decoded ?? null))
      if (pg) {
        // `nextval` in the inserting statement: readers bound by the settled plan row rely on it.
        const rowSeq: Fragment = yield* Sequences.value(ctx, "plan_row")
        yield* sql`INSERT INTO control_plans (plan_id, row_seq, card_json, decoded_input_json, decision)
          SELECT p.plan_id, ${rowSeq}, p.card_json, p.decoded_input_json, 'approved'
          FROM unnest(${chunk.map((i) => i.card.planId)}::text[], ${cards}::text[], ${inputs}::text[]) WITH ORDINALITY
            AS p(plan_id, card_json, decoded_input_json, n)
          ORDER BY p.n`
      } else {
        // Inside the write lock: the plan rows from this number on are this chunk's alone.
        const first = yield* Sequences.next(ctx, "plan_row")
        yield* sql`INSERT INTO control_plans (plan_id, row_seq, card_json, decoded_input_json, decision)
          SELECT j.value ->> 0, ${first} + j.key, j.value ->> 1, j.value ->> 2, 'approved'
          FROM json_each(${json(chunk.map((i, k) => [i.card.planId, cards[k], inputs[k]]))}) AS j`
      }
      const decision = JSON.stringify({ _tag: "Approved", decisionPrincipal: request.principal, decidedAt: at, scope: "once" })
      const principal = JSON.stringify(request.principal)
      const targets = chunk.map((item) => JSON.stringify(item.card.approval.target))
      yield* pg
        ? sql`INSERT INTO control_tokens (target_tag, run_id, target_id, token_id, target_json, resolved,
            decision_principal_json, decision_json)
          SELECT 'Plan', '', t.plan_id, t.plan_id, t.target_json, 1, ${principal}::text, ${decision}::text
          FROM unnest(${chunk.map((i) => i.card.planId)}::text[], ${targets}::text[]) AS t(plan_id, target_json)`
        : sql`INSERT INTO control_tokens (target_tag, run_id, target_id, token_id, target_json, resolved,
            decision_principal_json, decision_json)
          SELECT 'Plan', '', j.value ->> 0, j.value ->> 0, j.value ->> 1, 1, ${principal}, ${decision}
          FROM json_each(${json(chunk.map((i, k) => [i.card.planId, targets[k]]))}) AS j`
    }

    // What a claim and an at-once release left before: the summary without an owner.
    const summaries = items.map((item): RunSummary => {
      const { ownerId: _owner, ...released } = launchedSummary(ctx, item.card, item.runId, ctx.owner, at, request.parentRunId)
      return released
    })
    yield* ctx.store.createReleased(items.map((item, i) => ({
      runId: item.runId,
      stateJson: JSON.stringify(summaries[i]),
      ...(request.parentRunId === undefined ? {} : { options: { parentRunId: request.parentRunId } })
    })))

    const availableAtMs = Math.max(request.availableAtMs, at)
    const retryJson = request.retry === undefined ? null : JSON.stringify(request.retry)
    for (const chunk of chunksOf(items)) {
      yield* pg
        ? sql`INSERT INTO control_runs (run_id, created_seq, principal_id, principal_kind, queue, priority,
            available_at_ms, retry_json, attempt)
          SELECT r.run_id, r.created_seq, ${request.principal.id}::text, ${request.principal.kind}::text,
            ${request.queue}::text, ${request.priority}::bigint, ${availableAtMs}::bigint, ${retryJson}::text, 1
          FROM unnest(${chunk.map((i) => i.runId)}::text[], ${chunk.map((i) => i.createdSeq)}::bigint[]) AS r(run_id, created_seq)`
        : sql`INSERT INTO control_runs (run_id, created_seq, principal_id, principal_kind, queue, priority,
            available_at_ms, retry_json, attempt)
          SELECT j.value ->> 0, j.value ->> 1, ${request.principal.id}, ${request.principal.kind}, ${request.queue},
            ${request.priority}, ${availableAtMs}, ${retryJson}, 1
          FROM json_each(${json(chunk.map((i) => [i.runId, i.createdSeq]))}) AS j`
    }

    return items.map((item, i): StartedRun & { readonly key: string | undefined } => ({
      run: {
        ...summaries[i]!,
        launchedBy: { id: request.principal.id, kind: request.principal.kind },
        ...placement(request.queue, request.priority, availableAtMs, 1, request.retry?.maxAttempts)
      },
      plan: { card: item.card, decodedInput: item.decoded, decision: "approved" },
      created: true,
      handed: false,
      key: item.key
    }))
  })

/** Prepared appends one PostgreSQL statement evaluates (seven parameters each). */
export const appendChunkSize = 500

/**
 * Appends prepared journal entries (one run each) in the enclosing write: on PostgreSQL one `SELECT` per
 * {@link appendChunkSize} evaluates their expressions, each answering its position; on SQLite each is its
 * own `append` (two statements, the journal's own).
 */
export const appendPrepared = (ctx: SqlContext) =>
(appends: ReadonlyArray<Journal.PreparedAppend>) =>
  Effect.gen(function*() {
    if (!ctx.isPostgres) return yield* Effect.forEach(appends, (prepared) => prepared.append, { discard: true })
    for (let i = 0; i < appends.length; i += appendChunkSize) {
      const chunk = appends.slice(i, i + appendChunkSize)
      const columns = chunk.map((prepared, k) => ctx.sql`${prepared.expression} AS ${ctx.sql(`a${k}`)}`)
      const [row] = yield* ctx.sql<Record<string, unknown>>`SELECT ${ctx.sql.csv(columns)}`.pipe(persist("append journal entries"))
      yield* Effect.forEach(chunk, (prepared, k) => prepared.appended(row?.[`a${k}`]), { discard: true })
    }
  })
