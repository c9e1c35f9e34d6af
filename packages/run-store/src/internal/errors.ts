/**
 * Building `RunStoreError`s: invalid input, missing rows, decode failures and
 * the persistence mapping that keeps only the database error code.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import type * as Boundary from "./Boundary.js"
import { RunStoreError, type RunStoreErrorCode } from "./model.js"

const make = (code: RunStoreErrorCode, method: string, detail: string, cause: unknown) =>
  new RunStoreError({ code, method, message: `${code}: RunStore.${method}: ${detail}`, cause })

export const invalid = (method: string, refusal: Boundary.Refusal, extra?: Record<string, unknown>) =>
  make("invalid_run", method, refusal.detail, { field: refusal.field, detail: refusal.detail, ...extra })

export const notFoundRow = (method: string, runId: string) =>
  make("not_found_row", method, "no run with this id", { runId })

export const decodeFailed = (method: string, detail: string, cause: Record<string, unknown>) =>
  make("decode_failed", method, detail, cause)

export const writeInvariant = (method: string, runId: string, detail: string) =>
  make("persistence_failed", method, detail, { runId, stage: "write-invariant" })

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

/** Walks at most 8 `cause` links looking for a database error code. */
export const databaseCode = (error: unknown): DurableWriter.DatabaseErrorCode | undefined => {
  let current: unknown = error
  for (let depth = 0; depth <= 8 && isObject(current); depth++) {
    try {
      if (current._tag === "@baton/database/DatabaseError") return current.code as DurableWriter.DatabaseErrorCode
      if (current._tag === "SqlError") return DurableWriter.codeOf(current)
      current = current.cause
    } catch {
      return undefined
    }
  }
  return undefined
}

/**
 * The cause of a database failure: only a fresh `DatabaseError` with the code,
 * so an outer writer can still classify a retry and no driver message or bound
 * parameter leaks.
 */
export const databaseCause = (code: DurableWriter.DatabaseErrorCode) => ({
  category: code,
  cause: new DurableWriter.DatabaseError({ code })
})

/**
 * The user-facing detail of a database failure: the code and the database's
 * own fixed wording for it (e.g. "read_only: the database is open read-only"),
 * so a read-only, full or busy database is named instead of hidden.
 */
export const databaseDetail = (code: DurableWriter.DatabaseErrorCode): string =>
  `${code}: ${new DurableWriter.DatabaseError({ code }).message}`

/**
 * Maps any failure of a store write to a `RunStoreError`: a `RunStoreError`
 * passes through; a database constraint is `constraint`; everything else is
 * `persistence_failed`. The message carries the database code and its fixed
 * wording; the cause is `databaseCause(code)`.
 */
export const fromFailure = (method: string, error: unknown): RunStoreError => {
  if (error instanceof RunStoreError) return error
  const code = databaseCode(error)
  if (code === undefined) {
    const kind = isObject(error) && typeof error._tag === "string" ? error._tag : "unknown"
    return make("persistence_failed", method, "the store could not complete the operation", { category: kind })
  }
  return make(code === "constraint" ? "constraint" : "persistence_failed", method, databaseDetail(code), databaseCause(code))
}

/** `create` of an id that already has a row (§10.1): `constraint`, naming the cause without echoing input. */
export const duplicateRun = (method: string, runId: string) =>
  make("constraint", method, "a run with this id already exists", { runId, ...databaseCause("constraint") })
