/**
 * Per-step attempts of a run. Every write is fenced on run ownership alone
 * (the run row is `running` and owned by the caller), runs in the run's keyed
 * write, calls no strategy and journals nothing.
 *
 * @since 0.1.0
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import type * as OwnerIdModule from "@baton/journal/OwnerId"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Data, Effect, Layer, Option, Schema } from "effect"
import * as Admission from "./internal/Admission.js"
import * as Attempts from "./internal/attempts.js"
import * as Boundary from "./internal/Boundary.js"
import * as Errors from "./internal/errors.js"
import * as Rows from "./internal/rows.js"
import * as SpanOutcome from "./internal/SpanOutcome.js"

type OwnerId = OwnerIdModule.OwnerId

/**
 * Largest admissible `maxCheckpointBytes`: 16 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const maximumCheckpointBytes = 16 * 1024 * 1024

/**
 * Deepest admitted attempt JSON value (the root is depth 0).
 *
 * @since 0.1.0
 * @category constants
 */
export const maximumJsonDepth = Boundary.maximumJsonDepth

/**
 * Most JSON values in one attempt value.
 *
 * @since 0.1.0
 * @category constants
 */
export const maximumJsonNodes = Boundary.maximumJsonNodes

/**
 * A JSON value built from plain objects, dense arrays, finite numbers, well-formed strings,
 * booleans and `null`.
 *
 * @since 0.1.0
 * @category models
 */
export type Json = Attempts.Json

/**
 * Schema of an admissible JSON value (checked by the inert walk).
 *
 * @since 0.1.0
 * @category schemas
 */
export const JsonValue: Schema.Schema<Json> = Schema.declare(
  (value: unknown): value is Json => !Boundary.isRefusal(Boundary.jsonValue("value", value)),
  { identifier: "JsonValue" }
)

/**
 * Stable error codes.
 *
 * @since 0.1.0
 * @category errors
 */
export const AttemptStoreErrorCode = Schema.Literal(
  "invalid_attempt",
  "constraint",
  "decode_failed",
  "persistence_failed",
  "unknown"
)

/**
 * @since 0.1.0
 * @category errors
 */
export type AttemptStoreErrorCode = Schema.Schema.Type<typeof AttemptStoreErrorCode>

/**
 * The attempt store's error; message `<code>: AttemptStore.<method>: <detail>`;
 * `invalid_attempt` has no cause; persistence causes are `{ category, reason, cause? }`: `category`
 * is the database code, or `persistence_failed` for a failure without one; `reason` is the
 * failure's `_tag` or `"unknown"`.
 *
 * @since 0.1.0
 * @category errors
 */
export class AttemptStoreError extends Schema.TaggedError<AttemptStoreError>()("@baton/run-store/AttemptStoreError", {
  code: AttemptStoreErrorCode,
  method: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Unknown)
}) {}

const DurableId = Schema.String.pipe(
  Schema.filter((s) => !Boundary.isRefusal(Boundary.durableText("value", s)), { identifier: "DurableId" })
)
const NonNegSafeInt = Schema.Number.pipe(
  Schema.filter((n) => Number.isSafeInteger(n) && n >= 0, { identifier: "NonNegSafeInt" })
)

/**
 * An attempt's identity: run id, step key digest and attempt number.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AttemptId = Schema.Struct({ runId: DurableId, stepKeyDigest: DurableId, attempt: NonNegSafeInt })

/**
 * @since 0.1.0
 * @category models
 */
export type AttemptId = Schema.Schema.Type<typeof AttemptId>

/**
 * A stored attempt; optional keys are absent, never `null`. Times in epoch ms.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Attempt = Schema.Struct({
  ...AttemptId.fields,
  state: DurableId,
  startedAtMs: NonNegSafeInt,
  finishedAtMs: Schema.optional(NonNegSafeInt),
  heartbeatAtMs: Schema.optional(NonNegSafeInt),
  checkpoint: Schema.optional(JsonValue),
  error: Schema.optional(JsonValue),
  outcome: Schema.optional(JsonValue),
  meta: JsonValue
})

/**
 * @since 0.1.0
 * @category models
 */
export type Attempt = Schema.Schema.Type<typeof Attempt>

/**
 * `finish` input: the terminal state (not an in-progress state) and its time; omitted
 * JSON fields keep the stored ones.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FinishAttempt = Schema.Struct({
  ...AttemptId.fields,
  state: DurableId,
  finishedAtMs: NonNegSafeInt,
  error: Schema.optional(JsonValue),
  outcome: Schema.optional(JsonValue),
  meta: Schema.optional(JsonValue)
})

/**
 * @since 0.1.0
 * @category models
 */
export type FinishAttempt = Schema.Schema.Type<typeof FinishAttempt>

/**
 * `patch` input: only the supplied opaque fields are rewritten.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AttemptPatch = Schema.Struct({
  checkpoint: Schema.optional(JsonValue),
  error: Schema.optional(JsonValue),
  outcome: Schema.optional(JsonValue),
  meta: Schema.optional(JsonValue)
})

/**
 * @since 0.1.0
 * @category models
 */
export type AttemptPatch = Schema.Schema.Type<typeof AttemptPatch>

/** Cases without fields, one per tag. */
type Bare<Tags extends string> = { readonly [Tag in Tags]: {} }

/**
 * `put`: `Inserted`, `Upserted`, `ExistingSame`, `Conflict`, `FenceLost`, `RunNotFound`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type PutResult = Data.TaggedEnum<
  Bare<"Inserted" | "Upserted" | "ExistingSame" | "Conflict" | "FenceLost" | "RunNotFound">
>

/**
 * Constructors, `$is` and `$match` of {@link PutResult}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const PutResult = Data.taggedEnum<PutResult>()

/**
 * `heartbeat`: `Updated`, `FenceLost`, `NotFound`, `StateChanged`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type HeartbeatResult = Data.TaggedEnum<Bare<"Updated" | "FenceLost" | "NotFound" | "StateChanged">>

/**
 * Constructors, `$is` and `$match` of {@link HeartbeatResult}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const HeartbeatResult = Data.taggedEnum<HeartbeatResult>()

/**
 * `finish`: `Finished`, `FenceLost`, `NotFound`, `StateChanged`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type FinishResult = Data.TaggedEnum<Bare<"Finished" | "FenceLost" | "NotFound" | "StateChanged">>

/**
 * Constructors, `$is` and `$match` of {@link FinishResult}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const FinishResult = Data.taggedEnum<FinishResult>()

/**
 * `patch`: `Patched`, `NotFound`, `FenceLost`.
 *
 * @since 0.1.0
 * @category outcomes
 */
export type PatchResult = Data.TaggedEnum<Bare<"Patched" | "NotFound" | "FenceLost">>

/**
 * Constructors, `$is` and `$match` of {@link PatchResult}.
 *
 * @since 0.3.0
 * @category outcomes
 */
export const PatchResult = Data.taggedEnum<PatchResult>()

/**
 * Store options: in-progress states (default `["running"]`), the checkpoint ceiling in
 * bytes (default 1 MiB, 1..16 MiB) and the put mode (default `"insert"`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly inProgressStates?: ReadonlyArray<string>
  readonly maxCheckpointBytes?: number
  readonly putMode?: "insert" | "upsert"
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly put: (attempt: Attempt, owner: OwnerId) => Effect.Effect<PutResult, AttemptStoreError>
  readonly get: (id: AttemptId) => Effect.Effect<Option.Option<Attempt>, AttemptStoreError>
  readonly list: (runId: string) => Effect.Effect<ReadonlyArray<Attempt>, AttemptStoreError>
  readonly heartbeat: (
    runId: string,
    stepKeyDigest: string,
    attempt: number,
    owner: OwnerId,
    nowMs: number,
    checkpoint?: Json
  ) => Effect.Effect<HeartbeatResult, AttemptStoreError>
  readonly finish: (attempt: FinishAttempt, owner: OwnerId) => Effect.Effect<FinishResult, AttemptStoreError>
  readonly patch: (id: AttemptId, patch: AttemptPatch, owner: OwnerId) => Effect.Effect<PatchResult, AttemptStoreError>
}

/**
 * @since 0.1.0
 * @category services
 */
export class AttemptStore extends Context.Tag("@baton/run-store/AttemptStore")<AttemptStore, Service>() {}

const fail = (code: AttemptStoreErrorCode, method: string, detail: string, cause?: unknown) =>
  new AttemptStoreError({ code, method, message: `${code}: AttemptStore.${method}: ${detail}`, cause })

const invalid = (method: string, refusal: Boundary.Refusal) =>
  Effect.fail(new AttemptStoreError({
    code: "invalid_attempt",
    method,
    message: `invalid_attempt: AttemptStore.${method}: ${refusal.detail}`
  }))

const admit = <A>(method: string, admitted: Boundary.Admitted<A>): Effect.Effect<A, AttemptStoreError> =>
  Boundary.isRefusal(admitted) ? invalid(method, admitted) : Effect.succeed(admitted.value)

// The same mapping as the run store's writes; the attempt cause also names the failure's kind.
const fromFailure = (method: string) => (error: unknown): AttemptStoreError => {
  if (error instanceof AttemptStoreError) return error
  const mapped = Errors.persistence(error)
  return fail(mapped.code, method, mapped.detail, { ...mapped.cause, reason: Errors.failureKind(error) })
}

const decodeFailed = (method: string) => fail("decode_failed", method, "a stored attempt does not decode", undefined)

const traced = <A, E, R>(method: string, effect: Effect.Effect<A, E, R>) =>
  SpanOutcome.traced(`AttemptStore.${method}`, undefined, effect)

const validateOptions = (options: unknown): Boundary.Admitted<Required<Options>> => {
  if (options === undefined) return Boundary.ok({ inProgressStates: ["running"], maxCheckpointBytes: 1024 * 1024, putMode: "insert" })
  const fields = Boundary.record("options", options, ["inProgressStates", "maxCheckpointBytes", "putMode"], true)
  if (Boundary.isRefusal(fields)) return fields
  const raw = fields.value
  let states: ReadonlyArray<string> = ["running"]
  if (raw.inProgressStates !== undefined) {
    const list = raw.inProgressStates
    if (!Array.isArray(list) || list.length === 0 || list.length > 256) {
      return Boundary.refuse("options.inProgressStates", "options.inProgressStates must list 1..256 states")
    }
    const copied: Array<string> = []
    for (const entry of list) {
      const admitted = Boundary.durableText("options.inProgressStates", entry)
      if (Boundary.isRefusal(admitted)) return admitted
      if (copied.includes(admitted.value)) {
        return Boundary.refuse("options.inProgressStates", "options.inProgressStates must be unique")
      }
      copied.push(admitted.value)
    }
    states = Object.freeze(copied)
  }
  let maxBytes = 1024 * 1024
  if (raw.maxCheckpointBytes !== undefined) {
    const n = raw.maxCheckpointBytes
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 1 || n > maximumCheckpointBytes) {
      return Boundary.refuse("options.maxCheckpointBytes", `options.maxCheckpointBytes must be 1..${maximumCheckpointBytes}`)
    }
    maxBytes = n
  }
  let putMode: "insert" | "upsert" = "insert"
  if (raw.putMode !== undefined) {
    if (raw.putMode !== "insert" && raw.putMode !== "upsert") {
      return Boundary.refuse("options.putMode", "options.putMode must be insert or upsert")
    }
    putMode = raw.putMode
  }
  return Boundary.ok(Object.freeze({ inProgressStates: states, maxCheckpointBytes: maxBytes, putMode }))
}

const attemptColumns = `run_id, step_key_digest, attempt, state, started_at_ms, finished_at_ms, heartbeat_at_ms,
  checkpoint_json, error_json, outcome_json, meta_json`

/**
 * The SQL attempt store with `options`; fails `invalid_attempt` for invalid options.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeWith = (
  options?: Options
): Effect.Effect<Service, AttemptStoreError, DurableWriter.DurableWriter | SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const config = yield* admit("makeWith", validateOptions(options))
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter
    const pg = Dialect.isPostgres(sql)
    const inProgress = sql.in(config.inProgressStates)
    const columns = sql.literal(attemptColumns)

    // Inside a caller's transaction a store write joins without a savepoint (one round trip less): each body
    // writes with at most one statement, so a failure leaves nothing of its own half done.
    const keyed = <A, E>(method: string, runId: string, body: Effect.Effect<A, E>) =>
      writer.write(body, { key: runId, savepoint: false }).pipe(Effect.mapError(fromFailure(method)))

    /** The run's fence state (PostgreSQL: `FOR SHARE`, so a takeover waits for this write). */
    const runFence = (runId: string, owner: OwnerId) =>
      Effect.map(
        sql<{ readonly status: string; readonly owner_host_id: string | null; readonly owner_pid: unknown; readonly owner_nonce: string | null }>`
          SELECT status, owner_host_id, owner_pid, owner_nonce FROM flows_runs WHERE run_id = ${runId}
          ${pg ? sql.literal("FOR SHARE") : sql.literal("")}`,
        (rows): "missing" | "owned" | "lost" => {
          const row = rows[0]
          if (row === undefined) return "missing"
          return row.status === "running" && row.owner_host_id === owner.hostId && Number(row.owner_pid) === owner.pid &&
              row.owner_nonce === owner.nonce
            ? "owned"
            : "lost"
        }
      )

    const fence = (runId: string, owner: OwnerId) =>
      sql`EXISTS (SELECT 1 FROM flows_runs WHERE run_id = ${runId} AND status = 'running' AND ${Rows.ownerIs(sql, owner)})`

    /**
     * A guarded update's fence: PostgreSQL locks the run row `FOR SHARE` in a leading CTE (before the attempt
     * row, the order the separate read had), SQLite checks the row in the predicate.
     */
    const guardedBy = (runId: string, owner: OwnerId) =>
      pg
        ? {
          lead: sql`WITH fence AS MATERIALIZED (SELECT run_id FROM flows_runs WHERE run_id = ${runId}
            AND status = 'running' AND ${Rows.ownerIs(sql, owner)} FOR SHARE)`,
          holds: sql`EXISTS (SELECT 1 FROM fence)`
        }
        : { lead: sql``, holds: fence(runId, owner) }

    const idIs = (id: Attempts.AttemptIdValue) =>
      sql`run_id = ${id.runId} AND step_key_digest = ${id.stepKeyDigest} AND attempt = ${id.attempt}`

    const readAttempt = (method: string, id: Attempts.AttemptIdValue) =>
      Effect.flatMap(
        sql<Record<string, unknown>>`SELECT ${columns} FROM flows_attempts WHERE ${idIs(id)}`,
        (rows) => {
          const raw = rows[0]
          if (raw === undefined) return Effect.succeed(Option.none<Attempts.AttemptValue>())
          const decoded = Attempts.decodeRow(raw)
          return decoded === undefined ? Effect.fail(decodeFailed(method)) : Effect.succeed(Option.some(decoded))
        }
      )

    const text = (encoded: Attempts.Encoded | undefined) => encoded === undefined ? null : encoded.text

    const put: Service["put"] = (attempt, owner) =>
      traced(
        "put",
        Effect.gen(function*() {
          const input = yield* admit("put", Attempts.attempt(attempt, config.maxCheckpointBytes))
          const who = yield* admit("put", Admission.owner("owner", owner))
          const a = input.attempt
          const c = input.columns
          yield* Effect.annotateCurrentSpan({ runId: a.runId, stepKeyDigest: a.stepKeyDigest, attempt: a.attempt })
          return yield* keyed(
            "put",
            a.runId,
            Effect.gen(function*() {
              // The insert carries the fence (PostgreSQL locks the run row `FOR SHARE` first, as the read did);
              // only a miss reads the fence to say why.
              const inserted = pg
                ? yield* sql`INSERT INTO flows_attempts (${columns})
                  SELECT ${a.runId}::text, ${a.stepKeyDigest}::text, ${a.attempt}::bigint, ${a.state}::text,
                    ${a.startedAtMs}::bigint, ${a.finishedAtMs ?? null}::bigint, ${a.heartbeatAtMs ?? null}::bigint,
                    ${text(c.checkpoint)}::text, ${text(c.error)}::text, ${text(c.outcome)}::text, ${text(c.meta)}::text
                  FROM flows_runs WHERE run_id = ${a.runId} AND status = 'running' AND ${Rows.ownerIs(sql, who)}
                  FOR SHARE
                  ON CONFLICT (run_id, step_key_digest, attempt) DO NOTHING RETURNING run_id`
                : yield* sql`INSERT INTO flows_attempts (${columns})
                  SELECT ${a.runId}, ${a.stepKeyDigest}, ${a.attempt}, ${a.state}, ${a.startedAtMs},
                    ${a.finishedAtMs ?? null}, ${a.heartbeatAtMs ?? null}, ${text(c.checkpoint)}, ${text(c.error)},
                    ${text(c.outcome)}, ${text(c.meta)}
                  WHERE ${fence(a.runId, who)}
                  ON CONFLICT (run_id, step_key_digest, attempt) DO NOTHING RETURNING run_id`
              if (inserted.length > 0) return PutResult.Inserted()
              const state = yield* runFence(a.runId, who)
              if (state === "missing") return PutResult.RunNotFound()
              if (state === "lost") return PutResult.FenceLost()
              if (config.putMode === "upsert") {
                const upserted = yield* sql`UPDATE flows_attempts SET state = ${a.state}, started_at_ms = ${a.startedAtMs},
                  finished_at_ms = ${a.finishedAtMs ?? null}, heartbeat_at_ms = ${a.heartbeatAtMs ?? null},
                  checkpoint_json = ${text(c.checkpoint)}, error_json = ${text(c.error)},
                  outcome_json = ${text(c.outcome)}, meta_json = ${text(c.meta)}
                  WHERE ${idIs(a)} AND state IN ${inProgress} AND ${fence(a.runId, who)} RETURNING run_id`
                if (upserted.length > 0) return PutResult.Upserted()
              }
              const stored = yield* readAttempt("put", a)
              return Option.isSome(stored) && Attempts.sameAttempt(stored.value, a)
                ? PutResult.ExistingSame()
                : PutResult.Conflict()
            })
          )
        })
      )

    /** After a guarded update missed: attempt missing, run not owned, or the attempt left its in-progress states. */
    const classifyMiss = (id: Attempts.AttemptIdValue, owner: OwnerId) =>
      Effect.gen(function*() {
        const present = yield* sql`SELECT 1 AS present FROM flows_attempts WHERE ${idIs(id)}`
        if (present.length === 0) return "NotFound" as const
        const state = yield* runFence(id.runId, owner)
        return state === "owned" ? "StateChanged" as const : "FenceLost" as const
      })

    const heartbeat: Service["heartbeat"] = (runId, stepKeyDigest, attempt, owner, nowMs, checkpoint) =>
      traced(
        "heartbeat",
        Effect.gen(function*() {
          const id = yield* admit("heartbeat", Attempts.attemptId({ runId, stepKeyDigest, attempt }))
          const who = yield* admit("heartbeat", Admission.owner("owner", owner))
          const now = yield* admit("heartbeat", Boundary.safeNonNegative("nowMs", nowMs))
          const cp = checkpoint === undefined
            ? undefined
            : yield* admit("heartbeat", Attempts.json("checkpoint", checkpoint, config.maxCheckpointBytes))
          yield* Effect.annotateCurrentSpan({ runId: id.runId, stepKeyDigest: id.stepKeyDigest, attempt: id.attempt })
          return yield* keyed(
            "heartbeat",
            id.runId,
            Effect.gen(function*() {
              const guard = guardedBy(id.runId, who)
              const updated = yield* sql`${guard.lead} UPDATE flows_attempts
                SET heartbeat_at_ms = ${Dialect.greatest(sql)}(COALESCE(heartbeat_at_ms, ${now}), ${now}),
                  checkpoint_json = COALESCE(${text(cp)}, checkpoint_json)
                WHERE ${idIs(id)} AND state IN ${inProgress} AND ${guard.holds} RETURNING run_id`
              if (updated.length > 0) return HeartbeatResult.Updated()
              return HeartbeatResult[yield* classifyMiss(id, who)]()
            })
          )
        })
      )

    const finish: Service["finish"] = (attempt, owner) =>
      traced(
        "finish",
        Effect.gen(function*() {
          const input = yield* admit("finish", Attempts.finish(attempt))
          const who = yield* admit("finish", Admission.owner("owner", owner))
          const f = input.finish
          if (config.inProgressStates.includes(f.state)) {
            return yield* invalid("finish", Boundary.refuse("attempt.state", "attempt.state must not be an in-progress state"))
          }
          const c = input.columns
          yield* Effect.annotateCurrentSpan({ runId: f.runId, stepKeyDigest: f.stepKeyDigest, attempt: f.attempt })
          return yield* keyed(
            "finish",
            f.runId,
            Effect.gen(function*() {
              const guard = guardedBy(f.runId, who)
              const updated = yield* sql`${guard.lead} UPDATE flows_attempts SET state = ${f.state},
                  finished_at_ms = ${f.finishedAtMs},
                  error_json = COALESCE(${text(c.error)}, error_json),
                  outcome_json = COALESCE(${text(c.outcome)}, outcome_json),
                  meta_json = COALESCE(${text(c.meta)}, meta_json)
                WHERE ${idIs(f)} AND state IN ${inProgress} AND ${guard.holds} RETURNING run_id`
              if (updated.length > 0) return FinishResult.Finished()
              return FinishResult[yield* classifyMiss(f, who)]()
            })
          )
        })
      )

    const patch: Service["patch"] = (id, patchInput, owner) =>
      traced(
        "patch",
        Effect.gen(function*() {
          const target = yield* admit("patch", Attempts.attemptId(id))
          const c = yield* admit("patch", Attempts.patch(patchInput, config.maxCheckpointBytes))
          const who = yield* admit("patch", Admission.owner("owner", owner))
          yield* Effect.annotateCurrentSpan({
            runId: target.runId,
            stepKeyDigest: target.stepKeyDigest,
            attempt: target.attempt
          })
          return yield* keyed(
            "patch",
            target.runId,
            Effect.gen(function*() {
              const guard = guardedBy(target.runId, who)
              const updated = yield* sql`${guard.lead} UPDATE flows_attempts
                SET checkpoint_json = COALESCE(${text(c.checkpoint)}, checkpoint_json),
                  error_json = COALESCE(${text(c.error)}, error_json),
                  outcome_json = COALESCE(${text(c.outcome)}, outcome_json),
                  meta_json = COALESCE(${text(c.meta)}, meta_json)
                WHERE ${idIs(target)} AND ${guard.holds} RETURNING run_id`
              if (updated.length > 0) return PatchResult.Patched()
              const present = yield* sql`SELECT 1 AS present FROM flows_attempts WHERE ${idIs(target)}`
              return present.length === 0 ? PatchResult.NotFound() : PatchResult.FenceLost()
            })
          )
        })
      )

    const get: Service["get"] = (id) =>
      traced(
        "get",
        Effect.gen(function*() {
          const target = yield* admit("get", Attempts.attemptId(id))
          yield* Effect.annotateCurrentSpan({ runId: target.runId, stepKeyDigest: target.stepKeyDigest, attempt: target.attempt })
          return (yield* Effect.mapError(readAttempt("get", target), fromFailure("get"))) as Option.Option<Attempt>
        })
      )

    const list: Service["list"] = (runId) =>
      traced(
        "list",
        Effect.gen(function*() {
          const id = yield* admit("list", Boundary.durableText("runId", runId))
          yield* Effect.annotateCurrentSpan({ runId: id })
          const rows = yield* Effect.mapError(
            sql<Record<string, unknown>>`SELECT ${columns} FROM flows_attempts WHERE run_id = ${id}
              ORDER BY ${sql.literal(pg ? `step_key_digest COLLATE "C"` : "step_key_digest")}, attempt`,
            fromFailure("list")
          )
          const decoded: Array<Attempts.AttemptValue> = []
          for (const raw of rows) {
            const attempt = Attempts.decodeRow(raw)
            if (attempt === undefined) return yield* Effect.fail(decodeFailed("list"))
            decoded.push(attempt)
          }
          return Object.freeze(decoded) as ReadonlyArray<Attempt>
        })
      )

    return AttemptStore.of({ put, get, list, heartbeat, finish, patch })
  })

/**
 * `makeWith()` with the default options.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Service, never, DurableWriter.DurableWriter | SqlClient.SqlClient> = Effect.orDie(
  makeWith()
)

/**
 * A store for environments without persistence: every method fails with code `unknown`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeNoop = (overrides?: Partial<Service>): Service => {
  const none = (method: string) => () => Effect.fail(fail("unknown", method, "no attempt store in this environment"))
  return Object.freeze({
    put: none("put"),
    get: none("get"),
    list: none("list"),
    heartbeat: none("heartbeat"),
    finish: none("finish"),
    patch: none("patch"),
    ...overrides
  })
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<AttemptStore, never, DurableWriter.DurableWriter | SqlClient.SqlClient> = Layer.effect(
  AttemptStore,
  make
)

/**
 * The SQL store with options; fails to build with `invalid_attempt` for invalid options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (
  options: Options
): Layer.Layer<AttemptStore, AttemptStoreError, DurableWriter.DurableWriter | SqlClient.SqlClient> =>
  Layer.effect(AttemptStore, makeWith(options))

/**
 * @since 0.1.0
 * @category layers
 */
export const layerNoop = (overrides?: Partial<Service>): Layer.Layer<AttemptStore> =>
  Layer.succeed(AttemptStore, makeNoop(overrides))
