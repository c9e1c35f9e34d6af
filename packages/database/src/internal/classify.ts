/**
 * Driver error classification: one walk over a cause chain decides both
 * the reported `DatabaseError` code and the retry decision, so they cannot disagree.
 *
 * @internal
 */

/** @internal */
export type Code = "busy" | "constraint" | "read_only" | "corrupt" | "full" | "io" | "schema" | "unsupported" | "unknown"

/** Higher wins: a hard failure anywhere in the chain vetoes a retry. @internal */
export const precedence: Readonly<Record<Code, number>> = {
  corrupt: 8,
  full: 7,
  io: 6,
  read_only: 5,
  constraint: 4,
  schema: 3,
  busy: 2,
  unsupported: 1,
  unknown: 0
}

/** @internal */
export const databaseErrorTag = "@baton/database/DatabaseError"

const maxLinks = 16

const messagePatterns: ReadonlyArray<readonly [Code, ReadonlyArray<string>]> = [
  // A pool with no free connection in time (node-postgres' pool): contention, no statement ran.
  ["busy", [
    "database is locked",
    "database table is locked",
    "database is busy",
    "could not serialize access",
    "deadlock detected",
    "timeout exceeded when trying to connect"
  ]],
  ["read_only", ["attempt to write a readonly database"]],
  ["corrupt", ["database disk image is malformed", "file is not a database"]],
  ["full", ["database or disk is full"]],
  ["io", ["disk i/o error", "connection terminated", "is not queryable"]],
  ["schema", ["no such table", "no such column"]]
]

const fromMessage = (message: string): Code | undefined => {
  const lower = message.toLowerCase()
  for (const [code, patterns] of messagePatterns) {
    if (patterns.some((pattern) => lower.includes(pattern))) return code
  }
  return undefined
}

const sqliteCode = (code: string): Code | undefined => {
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return "busy"
  if (code.startsWith("SQLITE_CONSTRAINT") || code === "SQLITE_MISMATCH" || code === "SQLITE_TOOBIG") return "constraint"
  if (code.startsWith("SQLITE_READONLY")) return "read_only"
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") return "corrupt"
  if (code === "SQLITE_FULL" || code === "SQLITE_NOMEM") return "full"
  if (code.startsWith("SQLITE_IOERR") || code.startsWith("SQLITE_CANTOPEN") || code === "SQLITE_PROTOCOL") return "io"
  // SQLITE_ERROR has no finer code; the caller falls back to the message.
  return undefined
}

const sqlStateCode = (state: string): Code => {
  if (state === "40001" || state === "40P01" || state === "55P03") return "busy"
  if (state.startsWith("23") || state.startsWith("22")) return "constraint"
  if (state === "25006") return "read_only"
  if (state === "XX001" || state === "XX002") return "corrupt"
  if (state === "53100" || state === "53200") return "full"
  // 25P03/57P05: the server ended the session for idling (in a transaction or not): the connection is gone.
  if (
    state.startsWith("08") || state.startsWith("58") || state === "57P01" || state === "57P02" || state === "57P03" ||
    state === "25P03" || state === "57P05"
  ) {
    return "io"
  }
  if (state === "42P01" || state === "42703") return "schema"
  return "unknown"
}

const errnoCodes = new Set(["ECONNRESET", "ECONNREFUSED", "ETIMEDOUT", "EPIPE"])

/** Map one driver link (its `code`, else its message). @internal */
const linkCode = (code: unknown, message: unknown): Code | undefined => {
  if (typeof code === "string" && code.length > 0) {
    if (code.startsWith("SQLITE_")) {
      const mapped = sqliteCode(code)
      if (mapped !== undefined) return mapped
      return (typeof message === "string" ? fromMessage(message) : undefined) ?? "unknown"
    }
    if (errnoCodes.has(code)) return "io"
    if (/^[0-9A-Z]{5}$/.test(code)) return sqlStateCode(code)
    return "unknown"
  }
  return typeof message === "string" ? fromMessage(message) : undefined
}

const isObject = (u: unknown): u is Record<string, unknown> =>
  (typeof u === "object" && u !== null) || typeof u === "function"

/**
 * The code of `error`, following `cause` chains (cycle-safe, at most 16 links; a
 * throwing property read stops the walk). Links above the first `SqlError` are domain
 * wrappers: only a `DatabaseError` among them counts. `undefined` without provenance.
 *
 * @internal
 */
export const codeOf = (error: unknown): Code | undefined => {
  const seen = new Set<unknown>()
  let current: unknown = error
  let provenance = false
  let best: Code | undefined
  const consider = (code: Code | undefined) => {
    if (code !== undefined && (best === undefined || precedence[code] > precedence[best])) best = code
  }
  try {
    for (let links = 0; links < maxLinks && isObject(current) && !seen.has(current); links++) {
      seen.add(current)
      const tag = current["_tag"]
      if (tag === databaseErrorTag) {
        const code = current["code"]
        if (typeof code === "string" && code in precedence) {
          provenance = true
          consider(code as Code)
        }
        break
      }
      if (tag === "SqlError") {
        provenance = true
      } else if (provenance) {
        consider(linkCode(current["code"], current["message"]))
      }
      current = current["cause"]
    }
  } catch {
    // A hostile getter ends the walk with what was learned so far.
  }
  if (!provenance) return undefined
  return best ?? "unknown"
}

/** The codes a retry is vetoed by: replaying cannot fix them. @internal */
export const hardCodes: ReadonlySet<Code> = new Set(["corrupt", "full", "io", "read_only", "constraint", "schema"])
