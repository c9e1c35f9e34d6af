/**
 * `create` and the plain reads: get, lineage, latestRound.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"
import { Clock, Effect } from "effect"
import * as Admission from "../Admission.js"
import * as Boundary from "../Boundary.js"
import * as Errors from "../errors.js"
import { type CreateOptions, type RunRow, RunStoreError, type Service } from "../model.js"
import * as Rows from "../rows.js"
import { nextRowSeq } from "../rowSeq.js"
import { admit, operation, statement, type StoreContext, write } from "./context.js"

/**
 * Lineage membership of run `runId`: with `L = COALESCE(X.lineage_id, X.run_id)`,
 * rows with `lineage_id = L`, plus the row named `L` when it belongs to no other lineage.
 */
export const membership = (sql: SqlClient.SqlClient, runId: string): Fragment => {
  const root = sql`(SELECT COALESCE(x.lineage_id, x.run_id) FROM flows_runs x WHERE x.run_id = ${runId})`
  return sql`(flows_runs.lineage_id = ${root} OR (flows_runs.run_id = ${root}
    AND (flows_runs.lineage_id IS NULL OR flows_runs.lineage_id = ${root})))`
}

/** Ordering of rounds: ordinal, then run id bytewise on both dialects. */
export const roundOrder = (ctx: StoreContext): Fragment =>
  ctx.sql.literal(ctx.isPostgres ? `COALESCE(round_ordinal, 0), run_id COLLATE "C"` : `COALESCE(round_ordinal, 0), run_id`)

const decodeAll = (method: string, runId: string, rows: ReadonlyArray<unknown>) =>
  Effect.forEach(rows, (raw) => {
    const decoded = Rows.decode(method, runId, raw, true)
    return decoded instanceof RunStoreError ? Effect.fail(decoded) : Effect.succeed(decoded)
  })

const readFailure = (method: string) => (error: unknown) => Errors.fromFailure(method, error)

export const make = (ctx: StoreContext): Pick<Service, "create" | "get" | "lineage" | "latestRound"> => {
  const { sql } = ctx

  /**
   * PostgreSQL: the insert in one autocommit statement, numbered from the `row_seq`
   * sequence (no shared row; a duplicate spends a number, which leaves a gap). Only a
   * miss reads again, to tell a duplicate from a row deleted in between.
   */
  const createInOneStatement = (
    id: string,
    opts: { readonly parentRunId: string | null; readonly lineageId: string | null; readonly roundOrdinal: number | null },
    state: string,
    createdAtMs: number
  ): Effect.Effect<void, RunStoreError> =>
    Effect.gen(function*() {
      const inserted = yield* statement(
        ctx,
        "create",
        id,
        sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, parent_run_id, lineage_id, round_ordinal,
            state_json)
          VALUES (${nextRowSeq(sql)}, ${id}::text, 'pending', ${createdAtMs}::bigint, ${opts.parentRunId}::text,
            ${opts.lineageId}::text, ${opts.roundOrdinal}::bigint, ${state}::text)
          ON CONFLICT (run_id) DO NOTHING RETURNING run_id`
      )
      if (inserted.length > 0) return
      const [probe] = yield* Effect.mapError(
        sql<{ readonly present: boolean }>`SELECT EXISTS (SELECT 1 FROM flows_runs WHERE run_id = ${id}) AS present`,
        readFailure("create")
      )
      if (probe?.present === true) return yield* Effect.fail(Errors.duplicateRun("create", id))
      // The conflicting row was gone by the read: the id is free again, so try once more.
      return yield* createInOneStatement(id, opts, state, createdAtMs)
    })

  const create = (runId: string, stateJson: string, options?: CreateOptions) =>
    operation(
      "create",
      undefined,
      Effect.gen(function*() {
        const id = yield* admit("create", Admission.newRunId(runId))
        const opts = yield* admit("create", Admission.createOptions(options, id))
        const state = yield* admit("create", Boundary.jsonText("stateJson", stateJson))
        yield* Effect.annotateCurrentSpan({ runId: id })
        const createdAtMs = Math.floor(yield* Clock.currentTimeMillis)
        if (ctx.isPostgres) return yield* createInOneStatement(id, opts, state, createdAtMs)
        yield* write(
          ctx,
          "create",
          id,
          Effect.gen(function*() {
            // A duplicate id inserts nothing (other refusals still raise).
            const inserted = yield* sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, parent_run_id,
              lineage_id, round_ordinal, state_json) VALUES (${nextRowSeq(sql)}, ${id}, 'pending',
              ${createdAtMs}, ${opts.parentRunId}, ${opts.lineageId}, ${opts.roundOrdinal}, ${state})
              ON CONFLICT (run_id) DO NOTHING RETURNING run_id`
            if (inserted.length === 0) return yield* Effect.fail(Errors.duplicateRun("create", id))
          })
        )
      })
    )

  const get = (runId: string) =>
    operation(
      "get",
      undefined,
      Effect.gen(function*() {
        const id = yield* admit("get", Admission.runId(runId))
        yield* Effect.annotateCurrentSpan({ runId: id })
        const rows = yield* Effect.mapError(
          sql`SELECT ${Rows.fullColumns(sql)} FROM flows_runs WHERE run_id = ${id}`,
          readFailure("get")
        )
        if (rows.length === 0) return yield* Effect.fail(Errors.notFoundRow("get", id))
        const [row] = yield* decodeAll("get", id, rows)
        return row as RunRow
      })
    )

  const lineage = (runId: string) =>
    operation(
      "lineage",
      undefined,
      Effect.gen(function*() {
        const id = yield* admit("lineage", Admission.runId(runId))
        yield* Effect.annotateCurrentSpan({ runId: id })
        const rows = yield* Effect.mapError(
          sql`SELECT ${Rows.fullColumns(sql)} FROM flows_runs WHERE ${membership(sql, id)} ORDER BY ${roundOrder(ctx)}`,
          readFailure("lineage")
        )
        return Object.freeze(yield* decodeAll("lineage", id, rows)) as ReadonlyArray<RunRow>
      })
    )

  const latestRound = (runId: string) =>
    operation(
      "latestRound",
      undefined,
      Effect.gen(function*() {
        const id = yield* admit("latestRound", Admission.runId(runId))
        yield* Effect.annotateCurrentSpan({ runId: id })
        const rows = yield* Effect.mapError(
          sql`SELECT ${Rows.fullColumns(sql)} FROM flows_runs
            WHERE lineage_id = (SELECT COALESCE(x.lineage_id, x.run_id) FROM flows_runs x WHERE x.run_id = ${id})
            ORDER BY round_ordinal DESC LIMIT 1`,
          readFailure("latestRound")
        )
        const own = rows.length > 0 ? rows : yield* Effect.mapError(
          sql`SELECT ${Rows.fullColumns(sql)} FROM flows_runs WHERE run_id = ${id}`,
          readFailure("latestRound")
        )
        if (own.length === 0) return yield* Effect.fail(Errors.notFoundRow("latestRound", id))
        const [row] = yield* decodeAll("latestRound", id, own)
        return row as RunRow
      })
    )

  return { create, get, lineage, latestRound }
}
