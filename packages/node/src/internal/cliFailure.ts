/**
 * The CLI's one failure shape and the mapping of library errors to the CLI's exit codes and messages
 * (docs/node.md). Errors are recognised by their stable `_tag`/`code`, so the mapping needs no import of
 * the error classes themselves.
 */
import * as Data from "effect/Data"

/** A failure the CLI reports: `baton: <message>` (+ `hint: <hint>`) and exits with `exitCode`. */
export class CliFailure extends Data.TaggedError("CliFailure")<{
  readonly exitCode: 1 | 2 | 3 | 4 | 5 | 6 | 9
  readonly code: string
  readonly message: string
  readonly hint?: string | undefined
}> {}

/** Where the CLI was pointed, for messages: an absolute path or a redacted URL. */
export interface Target {
  readonly location: string
  readonly lockWaitMs: number
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

const field = (u: unknown, name: string): unknown => (isRecord(u) ? u[name] : undefined)

const text = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)

/** The `DatabaseError` code anywhere in a cause chain (a stand-in for the database package's `codeOf`). */
export const databaseCode = (error: unknown): string | undefined => {
  let current: unknown = error
  for (let depth = 0; depth < 16 && isRecord(current); depth++) {
    if (current["_tag"] === "@baton/database/DatabaseError" && typeof current["code"] === "string") {
      return current["code"]
    }
    current = current["cause"]
  }
  return undefined
}

const refusedCodes = new Set([
  "already_resolved",
  "claim_lost",
  "plan_denied",
  "plan_digest_mismatch",
  "envelope_mismatch",
  "unauthorized",
  "no_matching_wait",
  "code_drift"
])

const unavailableCodes = new Set(["busy", "read_only", "corrupt", "full", "io"])

const messageOf = (error: unknown): string => {
  const m = text(field(error, "message"))
  if (m !== undefined && m.length > 0) return m
  return String(error)
}

/** A lock still held after `--lock-wait` (at open time or on a write): exit 5 with a hint. */
export const locked = (target: Target): CliFailure =>
  new CliFailure({
    exitCode: 5,
    code: "locked",
    message: `${target.location} is locked by another writer; gave up after ${Math.round(target.lockWaitMs / 1000)} s`,
    hint: "retry, or raise --lock-wait"
  })

const fromDatabaseCode = (code: string, error: unknown, target: Target): CliFailure | undefined => {
  if (code === "busy") return locked(target)
  if (unavailableCodes.has(code)) {
    return new CliFailure({ exitCode: 5, code, message: `${target.location}: ${messageOf(error)}` })
  }
  return undefined
}

const postgresScheme = /^postgres(?:ql)?:\/\//i

/**
 * The database package's `wrong_dialect` messages name library calls (`use SqliteDatabase.layer`); a CLI
 * user needs the flag instead. A PostgreSQL target means a URL reached the SQLite side (`--db <url>`);
 * anything else means `--pg` got a file path or another scheme.
 */
export const wrongDialect = (target: string, libraryMessage: string): CliFailure => {
  // A database address given to the wrong flag is a usage error (bad argument values are 2).
  if (postgresScheme.test(target)) {
    return new CliFailure({
      exitCode: 2,
      code: "wrong_dialect",
      message: `--db takes a SQLite database file, but ${target} is a PostgreSQL URL`,
      hint: "pass the URL with --pg <url>"
    })
  }
  const got = /, got (.+?)(?: \(use [^)]*\))?$/.exec(libraryMessage)?.[1] ?? "something else"
  return new CliFailure({
    exitCode: 2,
    code: "wrong_dialect",
    message: `--pg needs a postgres:// or postgresql:// URL, got ${got}`,
    hint: "for a SQLite database file, use --db <file>"
  })
}

/**
 * Checks a `--pg` (or `BATON_PG_URL`) value before anything is opened: a postgres:// or postgresql:// URL
 * that parses; anything else is usage (exit 2) naming --pg.
 */
export const checkPgUrl = (value: string): void => {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(value)?.[1]
  if (scheme !== undefined && postgresScheme.test(value)) {
    try {
      new URL(value)
      return
    } catch {
      throw new CliFailure({
        exitCode: 2,
        code: "usage",
        message: `--pg is not a valid PostgreSQL URL: it does not parse as a URL`,
        hint: "pass --pg postgres://user@host:5432/database"
      })
    }
  }
  const got = scheme !== undefined
    ? `a ${scheme.toLowerCase()}:// URL`
    : /[/\\]|\.(db|sqlite3?)$/i.test(value)
    ? "a file path"
    : `"${value}"`
  throw wrongDialect("", `, got ${got}`)
}

// Control refuses a plan or run key reused for another request with `InvalidInput` (its receipts answer
// `Conflict` for the other verbs); both are the same idempotency conflict to a CLI user.
const keyConflictIssue = /^idempotency key [\s\S]* was used for another (?:plan|run|mutation)$/

/**
 * An idempotency key reused for another request (`Conflict`, exit 4), from a `Conflict`
 * receipt's message or control's `InvalidInput` for plan and run keys; `undefined` for anything else.
 */
export const keyConflict = (error: unknown): CliFailure | undefined => {
  const issue = text(field(error, "issue")) ?? (field(error, "_tag") === "Conflict" ? text(field(error, "message")) : undefined)
  return issue !== undefined && keyConflictIssue.test(issue)
    ? new CliFailure({ exitCode: 4, code: "conflict", message: issue, hint: "pass another --key, or repeat the first request to replay it" })
    : undefined
}

/** Maps any error a verb can meet to the failure the CLI prints. */
export const fromError = (error: unknown, target: Target): CliFailure => {
  if (error instanceof CliFailure) return error
  const tag = text(field(error, "_tag"))
  const code = text(field(error, "code"))
  if (tag === "@baton/database/DatabaseOpenError" && field(error, "reason") === "wrong_dialect") {
    return wrongDialect(text(field(error, "target")) ?? "", messageOf(error))
  }
  if (tag === "@baton/database/DatabaseOpenError" && field(error, "reason") === "locked") {
    // The open ladder gave up before --lock-wait ran out; the user's lever is the same.
    return locked(target)
  }
  if (tag === "@baton/database/DatabaseOpenError") {
    return new CliFailure({ exitCode: 5, code: text(field(error, "reason")) ?? "open_failed", message: messageOf(error) })
  }
  if (tag === "@baton/database/MigrationError") {
    return new CliFailure({ exitCode: 5, code: text(field(error, "reason")) ?? "migration", message: messageOf(error) })
  }
  if (tag === "@baton/database/DatabaseError") {
    return fromDatabaseCode(code ?? "unknown", error, target) ??
      new CliFailure({ exitCode: 1, code: code ?? "unknown", message: messageOf(error) })
  }
  switch (code) {
    case "run_not_found":
      return new CliFailure({
        exitCode: 3,
        code,
        message: `run "${text(field(error, "runId")) ?? "?"}" not found in ${target.location}`,
        hint: "baton runs"
      })
    case "plan_not_found":
      return new CliFailure({
        exitCode: 3,
        code,
        message: `plan "${text(field(error, "planId")) ?? "?"}" not found in ${target.location}`,
        hint: "baton plans"
      })
    case "invalid_input":
      return keyConflict(error) ?? new CliFailure({ exitCode: 2, code, message: text(field(error, "issue")) ?? messageOf(error) })
    case "flow_not_found":
      return new CliFailure({ exitCode: 2, code, message: messageOf(error) })
    case "launch_failed":
      return new CliFailure({ exitCode: 1, code, message: messageOf(error) })
    case "persistence_failed": {
      const dbCode = databaseCode(field(error, "cause"))
      const mapped = dbCode === undefined ? undefined : fromDatabaseCode(dbCode, error, target)
      return mapped ?? new CliFailure({ exitCode: 1, code, message: messageOf(error) })
    }
  }
  if (code !== undefined && refusedCodes.has(code)) {
    return new CliFailure({ exitCode: 4, code, message: messageOf(error) })
  }
  const dbCode = databaseCode(error)
  const mapped = dbCode === undefined ? undefined : fromDatabaseCode(dbCode, error, target)
  return mapped ?? new CliFailure({ exitCode: 1, code: code ?? "unexpected", message: messageOf(error) })
}

/** The stderr lines for a failure (without `--json`). */
export const render = (failure: CliFailure): string =>
  failure.hint === undefined ? `baton: ${failure.message}` : `baton: ${failure.message}\nhint: ${failure.hint}`

/** The stdout document for a failure with `--json`. */
export const renderJson = (failure: CliFailure): string =>
  JSON.stringify({ error: { code: failure.code, message: failure.message, exitCode: failure.exitCode } })
