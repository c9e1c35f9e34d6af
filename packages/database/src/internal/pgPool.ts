/**
 * The node-postgres pool behind `PgDatabase`: startup
 * parameters that pin `search_path` (and read-only sessions), number parsers for
 * `int8`/`numeric`, and the `SELECT 1` connect check with its refusal message.
 *
 * @internal
 */
import { Duration, Effect, Scope } from "effect"
import Pg from "pg"
import { DatabaseOpenError } from "../DatabaseOpenError.js"
import type { PgTarget } from "./pgUrl.js"

/** Options the pool is built from (already validated). */
export interface PoolOptions {
  readonly target: PgTarget
  readonly schema: string
  readonly readOnly: boolean
  readonly maxConnections: number
  readonly connectTimeout: Duration.Duration
  readonly applicationName: string
  /** Server-side `statement_timeout` of every session, in milliseconds. */
  readonly statementTimeoutMs: number
  /** Server-side `idle_in_transaction_session_timeout` of every session, in milliseconds. */
  readonly idleInTransactionTimeoutMs: number
  /** Idle time before the first TCP keepalive probe, in milliseconds. */
  readonly keepAliveInitialDelayMs: number
}

const int8Oid = 20
const numericOid = 1700

/**
 * Parse `int8`/`numeric` text to a JS number; a value that is not finite or
 * beyond ±(2^53−1) throws, which fails only that query (checked against node-postgres, see its tests).
 */
export const parseSafeNumber = (text: string): number => {
  const value = Number(text)
  if (!Number.isFinite(value) || Math.abs(value) > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`PostgreSQL number ${text.length > 40 ? `${text.slice(0, 40)}…` : text} exceeds the safe integer range`)
  }
  return value
}

const types: Pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => {
    if ((oid === int8Oid || oid === numericOid) && format !== "binary") return parseSafeNumber
    return Pg.types.getTypeParser(oid, format as "text")
  }) as Pg.CustomTypesConfig["getTypeParser"]
}

/**
 * The startup `options` parameter: `search_path` pinned to the schema (a
 * per-session `SET` would not stick, because outside transactions a statement
 * checks out any pool connection), JIT compilation off, plus read-only sessions
 * when asked. Every Baton statement is a short indexed read or write: JIT only
 * triggers on an overestimated plan cost (a listing page's recursive walks) and
 * then compiles for hundreds of milliseconds before a query of a few.
 */
export const startupOptions = (schema: string, readOnly: boolean, fromUrl: string | undefined): string =>
  [fromUrl, `-c search_path=${schema}`, "-c jit=off", readOnly ? "-c default_transaction_read_only=on" : undefined]
    .filter((part): part is string => part !== undefined && part.length > 0)
    .join(" ")

/** Build the pool; it is ended when `scope` closes. */
export const makePool = (options: PoolOptions): Effect.Effect<Pg.Pool, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const pool = new Pg.Pool({
        connectionString: options.target.connectionString,
        max: options.maxConnections,
        connectionTimeoutMillis: Math.max(1, Math.ceil(Duration.toMillis(options.connectTimeout))),
        application_name: options.applicationName,
        options: startupOptions(options.schema, options.readOnly, options.target.startupOptions),
        // Sent as startup parameters, so every session has them from its first statement:
        // a session whose client went silent mid-transaction ends on the server and
        // releases its row and intention locks, instead of holding them for hours.
        statement_timeout: options.statementTimeoutMs,
        idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs,
        keepAlive: true,
        keepAliveInitialDelayMillis: options.keepAliveInitialDelayMs,
        types
      })
      // An idle client's socket error must not crash the process; the pool drops it.
      pool.on("error", () => {})
      return pool
    }),
    (pool) => Effect.promise(() => pool.end().catch(() => undefined))
  )

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : undefined

/** A short, password-free reason for a failed connect: the message may reach a log. */
export const connectReason = (error: unknown): string => {
  const code = codeOf(error)
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused"
    case "ETIMEDOUT":
      return "timed out"
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "host not found"
    case "28P01":
    case "28000":
      return "authentication failed"
    case "3D000":
      return "database does not exist"
    case "57P03":
      return "the server is starting up or shutting down"
    case "53300":
      return "too many connections"
  }
  const message = error instanceof Error ? error.message.toLowerCase() : ""
  if (message.includes("timeout")) return "timed out"
  // The whole cause stays in `cause`; the message carries only its code.
  return code === undefined ? "connection failed" : `connection failed (${code})`
}

/**
 * Run `SELECT 1` within `connectTimeout`; a failure is `connect_failed` naming
 * host, port and database, never the password.
 */
export const checkConnection = (
  pool: Pg.Pool,
  target: PgTarget,
  connectTimeout: Duration.Duration
): Effect.Effect<void, DatabaseOpenError> => {
  const refuse = (cause: unknown) =>
    new DatabaseOpenError({
      reason: "connect_failed",
      target: target.redacted,
      message: `cannot connect to PostgreSQL at ${target.host}:${target.port}/${target.database}: ${connectReason(cause)}`,
      cause
    })
  return Effect.tryPromise({
    try: () => pool.query("SELECT 1"),
    catch: refuse
  }).pipe(
    Effect.timeoutFail({
      duration: Duration.sum(connectTimeout, Duration.millis(500)),
      onTimeout: () => refuse(Object.assign(new Error("timeout"), { code: "ETIMEDOUT" }))
    }),
    Effect.asVoid
  )
}
