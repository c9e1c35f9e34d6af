/**
 * `createReleased`: many runs created at once, already released in their queue (status `suspended`, no
 * owner, no claim, `started_at_ms` the creation time), which is the row a `create` followed by
 * `claimAndOwn` and a `transitionOwned` to `suspended` leaves. No owner ever held them, so no ownership
 * fact is stated: the first claim states `claimed` and `activated` as for any unowned run.
 *
 * One multi-row `INSERT` per chunk, the runs travelling as array parameters (PostgreSQL `unnest`,
 * numbered by `nextval` per row) or one JSON parameter (SQLite `json_each`, numbered from one reading of
 * the next `row_seq` inside the write lock), so the statement text is the same for every chunk and
 * no bound-parameter limit applies.
 */
import { Clock, Effect } from "effect"
import * as Admission from "../Admission.js"
import * as Boundary from "../Boundary.js"
import * as Errors from "../errors.js"
import type { ReleasedRun, RunStoreError, Service } from "../model.js"
import { nextRowSeq } from "../rowSeq.js"
import { admit, operation, type StoreContext, write } from "./context.js"

/** Most runs one insert statement writes. */
export const chunkSize = 1000

/** Most runs one `createReleased` call writes. */
export const maxRuns = 10_000

interface Admitted {
  readonly runId: string
  readonly stateJson: string
  readonly parentRunId: string | null
  readonly lineageId: string | null
  readonly roundOrdinal: number | null
}

const method = "createReleased"

type Inserted = { readonly run_id: string }

/** A refusal of run `i`'s field, named `runs[i].<field>`. */
const within = <A>(i: number, admitted: Boundary.Admitted<A>): Boundary.Admitted<A> =>
  Boundary.isRefusal(admitted) ? Boundary.refuse(`runs[${i}].${admitted.field}`, admitted.detail) : admitted

const refused = (field: string, detail: string) => Effect.fail(Errors.invalid(method, Boundary.refuse(field, detail)))

const admitRuns = (runs: unknown): Effect.Effect<ReadonlyArray<Admitted>, RunStoreError> =>
  Effect.gen(function*() {
    if (!Array.isArray(runs)) return yield* refused("runs", "runs must be an array")
    if (runs.length > maxRuns) return yield* refused("runs", `runs must hold at most ${maxRuns} runs`)
    const seen = new Set<string>()
    const out: Array<Admitted> = []
    for (let i = 0; i < runs.length; i++) {
      const fields = yield* admit(method, Boundary.record(`runs[${i}]`, runs[i], ["runId", "stateJson", "options"], true))
      const raw = fields as { readonly runId?: unknown; readonly stateJson?: unknown; readonly options?: unknown }
      const runId = yield* admit(method, within(i, Admission.newRunId(raw.runId)))
      if (seen.has(runId)) {
        return yield* refused(`runs[${i}].runId`, "runId repeats an earlier run of the batch")
      }
      seen.add(runId)
      const options = yield* admit(method, within(i, Admission.createOptions(raw.options, runId)))
      const stateJson = yield* admit(method, within(i, Boundary.jsonText("stateJson", raw.stateJson)))
      out.push({ runId, stateJson, ...options })
    }
    return out
  })

export const make = (ctx: StoreContext): Pick<Service, "createReleased"> => {
  const { sql } = ctx

  const insertPg = (chunk: ReadonlyArray<Admitted>, createdAtMs: number) =>
    sql<Inserted>`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms, parent_run_id, lineage_id,
        round_ordinal, state_json)
      SELECT ${nextRowSeq(sql)}, r.run_id, 'suspended', ${createdAtMs}::bigint, ${createdAtMs}::bigint, r.parent_run_id,
        r.lineage_id, r.round_ordinal, r.state_json
      FROM unnest(${chunk.map((r) => r.runId)}::text[], ${chunk.map((r) => r.parentRunId)}::text[],
        ${chunk.map((r) => r.lineageId)}::text[], ${chunk.map((r) => r.roundOrdinal)}::bigint[],
        ${chunk.map((r) => r.stateJson)}::text[]) WITH ORDINALITY
        AS r(run_id, parent_run_id, lineage_id, round_ordinal, state_json, n)
      ORDER BY r.n
      ON CONFLICT (run_id) DO NOTHING RETURNING run_id`

  // `WHERE true` keeps SQLite from reading `ON CONFLICT` as a join constraint of the SELECT.
  const insertSqlite = (chunk: ReadonlyArray<Admitted>, createdAtMs: number, firstRowSeq: number) =>
    sql<Inserted>`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms, parent_run_id, lineage_id,
        round_ordinal, state_json)
      SELECT ${firstRowSeq} + j.key, j.value ->> 0, 'suspended', ${createdAtMs}, ${createdAtMs}, j.value ->> 1,
        j.value ->> 2, j.value ->> 3, j.value ->> 4
      FROM json_each(${JSON.stringify(chunk.map((r) => [r.runId, r.parentRunId, r.lineageId, r.roundOrdinal, r.stateJson]))}) AS j
      WHERE true
      ON CONFLICT (run_id) DO NOTHING RETURNING run_id`

  const insertChunk = (chunk: ReadonlyArray<Admitted>, createdAtMs: number) =>
    Effect.gen(function*() {
      // SQLite: inside the write lock, so the numbers from this reading on are this chunk's alone.
      const inserted = ctx.isPostgres
        ? yield* insertPg(chunk, createdAtMs)
        : yield* Effect.flatMap(
          sql<{ readonly n: number | string }>`SELECT ${nextRowSeq(sql)} AS n`,
          ([next]) => insertSqlite(chunk, createdAtMs, Number(next!.n))
        )
      if (inserted.length === chunk.length) return
      const written = new Set(inserted.map((row) => row.run_id))
      const taken = chunk.find((run) => !written.has(run.runId))!
      return yield* Effect.fail(Errors.duplicateRun(method, taken.runId))
    })

  const createReleased = (runs: ReadonlyArray<ReleasedRun>) =>
    operation(
      method,
      undefined,
      Effect.gen(function*() {
        const admitted = yield* admitRuns(runs)
        if (admitted.length === 0) return
        yield* Effect.annotateCurrentSpan({ runs: admitted.length })
        const createdAtMs = Math.floor(yield* Clock.currentTimeMillis)
        const chunks: Array<ReadonlyArray<Admitted>> = []
        for (let i = 0; i < admitted.length; i += chunkSize) chunks.push(admitted.slice(i, i + chunkSize))
        yield* write(
          ctx,
          method,
          admitted[0]!.runId,
          Effect.forEach(chunks, (chunk) => insertChunk(chunk, createdAtMs), { discard: true })
        )
      })
    )

  return { createReleased }
}
