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

/** The `_tag` of a failure, or `"unknown"` for an untagged one. */
export const failureKind = (error: unknown): string =>
  isObject(error) && typeof error._tag === "string" ? error._tag : "unknown"

/**
 * How every store maps a failure of its write that is not already its own
 * error: a database constraint is `constraint`; everything else is
 * `persistence_failed`. With a database code the detail carries the code and
 * its fixed wording and the cause is `databaseCause(code)`. Without one the
 * cause's category is `persistence_failed` too (never a database code such as
 * `unknown`, which would claim the database failed) and `reason` names the
 * failure's kind.
 */
export const persistence = (error: unknown): {
  readonly code: "constraint" | "persistence_failed"
  readonly detail: string
  readonly cause: Readonly<Record<string, unknown>>
} => {
  const code = databaseCode(error)
  if (code === undefined) {
    return {
      code: "persistence_failed",
      detail: "the store could not complete the operation",
      cause: { category: "persistence_failed", reason: failureKind(error) }
    }
  }
  return { code: code === "constraint" ? "constraint" : "persistence_failed", detail: databaseDetail(code), cause: databaseCause(code) }
}

/**
 * Maps any failure of a store write to a `RunStoreError`: a `RunStoreError`
 * passes through; everything else maps by {@link persistence}.
 */
export const fromFailure = (method: string, error: unknown): RunStoreError => {
  if (error instanceof RunStoreError) return error
  const mapped = persistence(error)
  return make(mapped.code, method, mapped.detail, mapped.cause)
}

/** `create` of an id that already has a row: `constraint`, naming the cause without echoing input. */
export const duplicateRun = (method: string, runId: string) =>
  make("constraint", method, "a run with this id already exists", { runId, ...databaseCause("constraint") })
