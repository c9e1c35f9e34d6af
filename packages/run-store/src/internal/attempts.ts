/**
 * Attempt admission, row decoding and comparison.
 */
import * as Boundary from "./Boundary.js"

export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

export interface AttemptIdValue {
  readonly runId: string
  readonly stepKeyDigest: string
  readonly attempt: number
}

export interface AttemptValue extends AttemptIdValue {
  readonly state: string
  readonly startedAtMs: number
  readonly finishedAtMs?: number
  readonly heartbeatAtMs?: number
  readonly checkpoint?: Json
  readonly error?: Json
  readonly outcome?: Json
  readonly meta: Json
}

/** An `AttemptValue` while its optional fields are set, before its `meta` (always last). */
type Building = { -readonly [K in keyof Omit<AttemptValue, "meta">]: Omit<AttemptValue, "meta">[K] }

export interface FinishValue extends AttemptIdValue {
  readonly state: string
  readonly finishedAtMs: number
  readonly error?: Json
  readonly outcome?: Json
  readonly meta?: Json
}

export interface PatchValue {
  readonly checkpoint?: Json
  readonly error?: Json
  readonly outcome?: Json
  readonly meta?: Json
}

type Admitted<A> = Boundary.Admitted<A>
const { isRefusal, ok, refuse } = Boundary

const encoder = new TextEncoder()

/** Admitted JSON value plus its stored text. */
export interface Encoded {
  readonly value: Json
  readonly text: string
}

export const json = (field: string, value: unknown, maxBytes?: number): Admitted<Encoded> => {
  const copied = Boundary.jsonValue(field, value)
  if (isRefusal(copied)) return copied
  const text = JSON.stringify(copied.value)
  if (maxBytes !== undefined && encoder.encode(text).length > maxBytes) {
    return refuse(field, `${field} exceeds the checkpoint ceiling of ${maxBytes} bytes`)
  }
  return ok({ value: copied.value as Json, text })
}

const idFields = ["runId", "stepKeyDigest", "attempt"] as const

const readId = (field: string, raw: Readonly<Record<string, unknown>>): Admitted<AttemptIdValue> => {
  const runId = Boundary.durableText(`${field}.runId`, raw.runId)
  if (isRefusal(runId)) return runId
  const digest = Boundary.durableText(`${field}.stepKeyDigest`, raw.stepKeyDigest)
  if (isRefusal(digest)) return digest
  const attempt = Boundary.safeNonNegative(`${field}.attempt`, raw.attempt)
  if (isRefusal(attempt)) return attempt
  return ok({ runId: runId.value, stepKeyDigest: digest.value, attempt: attempt.value })
}

/** Structural id: extra data fields are ignored so an `Attempt` is accepted as its id. */
export const attemptId = (value: unknown): Admitted<AttemptIdValue> => {
  const fields = Boundary.record("id", value, idFields, false)
  if (isRefusal(fields)) return fields
  for (const key of idFields) if (!(key in fields.value)) return refuse(`id.${key}`, `id.${key} is required`)
  return readId("id", fields.value)
}

/** Optional timestamp: absent key and `undefined` are both absent. */
const optionalTime = (field: string, value: unknown): Admitted<number | undefined> =>
  value === undefined ? ok(undefined) : Boundary.safeNonNegative(field, value)

const optionalJson = (field: string, present: boolean, value: unknown, maxBytes?: number) =>
  !present ? ok(undefined) : json(field, value, maxBytes)

/** The encoded optional JSON columns of an admitted input. */
export interface JsonColumns {
  readonly checkpoint: Encoded | undefined
  readonly error: Encoded | undefined
  readonly outcome: Encoded | undefined
  readonly meta: Encoded | undefined
}

export const attempt = (value: unknown, maxCheckpointBytes: number): Admitted<{
  readonly attempt: AttemptValue
  readonly columns: JsonColumns
}> => {
  const keys = [...idFields, "state", "startedAtMs", "finishedAtMs", "heartbeatAtMs", "checkpoint", "error", "outcome", "meta"]
  const fields = Boundary.record("attempt", value, keys, true)
  if (isRefusal(fields)) return fields
  const raw = fields.value
  for (const key of [...idFields, "state", "startedAtMs", "meta"]) {
    if (!(key in raw)) return refuse(`attempt.${key}`, `attempt.${key} is required`)
  }
  const id = readId("attempt", raw)
  if (isRefusal(id)) return id
  const state = Boundary.durableText("attempt.state", raw.state)
  if (isRefusal(state)) return state
  const startedAtMs = Boundary.safeNonNegative("attempt.startedAtMs", raw.startedAtMs)
  if (isRefusal(startedAtMs)) return startedAtMs
  const finishedAtMs = optionalTime("attempt.finishedAtMs", raw.finishedAtMs)
  if (isRefusal(finishedAtMs)) return finishedAtMs
  const heartbeatAtMs = optionalTime("attempt.heartbeatAtMs", raw.heartbeatAtMs)
  if (isRefusal(heartbeatAtMs)) return heartbeatAtMs
  const checkpoint = optionalJson("attempt.checkpoint", "checkpoint" in raw, raw.checkpoint, maxCheckpointBytes)
  if (isRefusal(checkpoint)) return checkpoint
  const error = optionalJson("attempt.error", "error" in raw, raw.error)
  if (isRefusal(error)) return error
  const outcome = optionalJson("attempt.outcome", "outcome" in raw, raw.outcome)
  if (isRefusal(outcome)) return outcome
  const meta = json("attempt.meta", raw.meta)
  if (isRefusal(meta)) return meta
  const result: Building = { ...id.value, state: state.value, startedAtMs: startedAtMs.value }
  if (finishedAtMs.value !== undefined) result.finishedAtMs = finishedAtMs.value
  if (heartbeatAtMs.value !== undefined) result.heartbeatAtMs = heartbeatAtMs.value
  if (checkpoint.value !== undefined) result.checkpoint = checkpoint.value.value
  if (error.value !== undefined) result.error = error.value.value
  if (outcome.value !== undefined) result.outcome = outcome.value.value
  const attempt: AttemptValue = { ...result, meta: meta.value.value }
  return ok({
    attempt: Boundary.deepFreeze(attempt),
    columns: { checkpoint: checkpoint.value, error: error.value, outcome: outcome.value, meta: meta.value }
  })
}

export const finish = (value: unknown): Admitted<{ readonly finish: FinishValue; readonly columns: JsonColumns }> => {
  const keys = [...idFields, "state", "finishedAtMs", "error", "outcome", "meta"]
  const fields = Boundary.record("attempt", value, keys, true)
  if (isRefusal(fields)) return fields
  const raw = fields.value
  for (const key of [...idFields, "state", "finishedAtMs"]) {
    if (!(key in raw)) return refuse(`attempt.${key}`, `attempt.${key} is required`)
  }
  const id = readId("attempt", raw)
  if (isRefusal(id)) return id
  const state = Boundary.durableText("attempt.state", raw.state)
  if (isRefusal(state)) return state
  const finishedAtMs = Boundary.safeNonNegative("attempt.finishedAtMs", raw.finishedAtMs)
  if (isRefusal(finishedAtMs)) return finishedAtMs
  const error = optionalJson("attempt.error", "error" in raw, raw.error)
  if (isRefusal(error)) return error
  const outcome = optionalJson("attempt.outcome", "outcome" in raw, raw.outcome)
  if (isRefusal(outcome)) return outcome
  const meta = optionalJson("attempt.meta", "meta" in raw, raw.meta)
  if (isRefusal(meta)) return meta
  return ok({
    finish: { ...id.value, state: state.value, finishedAtMs: finishedAtMs.value },
    columns: { checkpoint: undefined, error: error.value, outcome: outcome.value, meta: meta.value }
  })
}

export const patch = (value: unknown, maxCheckpointBytes: number): Admitted<JsonColumns> => {
  const fields = Boundary.record("patch", value, ["checkpoint", "error", "outcome", "meta"], true)
  if (isRefusal(fields)) return fields
  const raw = fields.value
  const checkpoint = optionalJson("patch.checkpoint", "checkpoint" in raw, raw.checkpoint, maxCheckpointBytes)
  if (isRefusal(checkpoint)) return checkpoint
  const error = optionalJson("patch.error", "error" in raw, raw.error)
  if (isRefusal(error)) return error
  const outcome = optionalJson("patch.outcome", "outcome" in raw, raw.outcome)
  if (isRefusal(outcome)) return outcome
  const meta = optionalJson("patch.meta", "meta" in raw, raw.meta)
  if (isRefusal(meta)) return meta
  return ok({ checkpoint: checkpoint.value, error: error.value, outcome: outcome.value, meta: meta.value })
}

const integer = (value: unknown): number | undefined => Boundary.storedInteger(value) ?? undefined

const parseColumn = (value: unknown): { ok: true; value: Json | undefined } | { ok: false } => {
  if (value === null) return { ok: true, value: undefined }
  if (typeof value !== "string") return { ok: false }
  try {
    const parsed = JSON.parse(value)
    const copied = Boundary.jsonValue("column", parsed)
    return isRefusal(copied) ? { ok: false } : { ok: true, value: copied.value as Json }
  } catch {
    return { ok: false }
  }
}

/** Decodes a stored attempt row; `undefined` when any column fails re-validation. */
export const decodeRow = (raw: Record<string, unknown>): AttemptValue | undefined => {
  const runId = raw.run_id
  const digest = raw.step_key_digest
  const state = raw.state
  if (
    typeof runId !== "string" || typeof digest !== "string" || typeof state !== "string" ||
    isRefusal(Boundary.durableText("run_id", runId)) || isRefusal(Boundary.durableText("digest", digest)) ||
    isRefusal(Boundary.durableText("state", state))
  ) return undefined
  const attemptNo = integer(raw.attempt)
  const startedAtMs = integer(raw.started_at_ms)
  if (attemptNo === undefined || startedAtMs === undefined) return undefined
  const result: Building = { runId, stepKeyDigest: digest, attempt: attemptNo, state, startedAtMs }
  for (const [column, key] of [["finished_at_ms", "finishedAtMs"], ["heartbeat_at_ms", "heartbeatAtMs"]] as const) {
    if (raw[column] === null) continue
    const n = integer(raw[column])
    if (n === undefined) return undefined
    result[key] = n
  }
  for (const [column, key] of [["checkpoint_json", "checkpoint"], ["error_json", "error"], ["outcome_json", "outcome"]] as const) {
    const parsed = parseColumn(raw[column])
    if (!parsed.ok) return undefined
    if (parsed.value !== undefined) result[key] = parsed.value
  }
  if (raw.meta_json === null) return undefined
  const meta = parseColumn(raw.meta_json)
  if (!meta.ok || meta.value === undefined) return undefined
  const attempt: AttemptValue = { ...result, meta: meta.value }
  return Boundary.deepFreeze(attempt)
}

/** JSON equality ignoring object key order (array order matters). */
export const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) {
    const bb = b as ReadonlyArray<unknown>
    return a.length === bb.length && a.every((item, i) => jsonEqual(item, bb[i]))
  }
  const ak = Object.keys(a)
  const bk = Object.keys(b)
  if (ak.length !== bk.length) return false
  return ak.every((key) => Object.prototype.hasOwnProperty.call(b, key) &&
    jsonEqual((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]))
}

/** Same state, timestamps (absent = absent) and JSON values. */
export const sameAttempt = (stored: AttemptValue, input: AttemptValue): boolean =>
  stored.state === input.state && stored.startedAtMs === input.startedAtMs &&
  stored.finishedAtMs === input.finishedAtMs && stored.heartbeatAtMs === input.heartbeatAtMs &&
  jsonEqual(stored.checkpoint, input.checkpoint) && jsonEqual(stored.error, input.error) &&
  jsonEqual(stored.outcome, input.outcome) && jsonEqual(stored.meta, input.meta)
