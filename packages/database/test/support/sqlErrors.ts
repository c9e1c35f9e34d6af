/**
 * Test support: `SqlError`s shaped exactly like the drivers' (an `SqlError` whose
 * `cause` carries the driver's `code`), for the classification and retry checks.
 */
import { SqlError } from "@effect/sql/SqlError"

/** A driver error object as better-sqlite3 or node-postgres raise it. */
export const driverError = (code: string | undefined, message = `driver error ${code ?? ""}`, cause?: unknown) =>
  Object.assign(new Error(message), code === undefined ? {} : { code }, cause === undefined ? {} : { cause })

/** An `SqlError` whose cause is a driver error coded `code`. */
export const sqlError = (code: string | undefined, message?: string, cause?: unknown) =>
  new SqlError({ cause: driverError(code, message, cause), message: "Failed to execute statement" })
