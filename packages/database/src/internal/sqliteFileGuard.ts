/**
 * The next steps of the SQLite open sequence (`sqliteFileOpen.ts`): inspect an existing
 * file before anything can modify it (header, readability, foreign tables),
 * then convert a read-write database to WAL. Both run on the open ladder.
 *
 * @internal
 */
import Sqlite from "better-sqlite3"
import * as fs from "node:fs"
import { Duration, Effect, Schedule } from "effect"
import { DatabaseOpenError } from "../DatabaseOpenError.js"
import { table as ledgerTable } from "../Migrations.js"

/** Attempts of the open ladder (retries while another process holds the file's lock); also named in the `locked` message. */
export const ladderAttempts = 40

/**
 * The open ladder: 40 attempts, exponential from 5 ms with jitter, each delay
 * capped at 250 ms. It bounds a start-up race, not a workload. Delays use
 * Effect's `Clock` and jitter Effect's `Random`.
 */
export const openLadder = Schedule.exponential(Duration.millis(5)).pipe(
  Schedule.jittered,
  Schedule.modifyDelay((delay) => Duration.min(delay, Duration.millis(250))),
  Schedule.intersect(Schedule.recurs(ladderAttempts - 1))
)

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : undefined

const messageOf = (error: unknown): string =>
  typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string"
    ? (error as { message: string }).message
    : String(error)

/** Whether a driver throw is a transient lock conflict the ladder retries. */
export const isLockError = (error: unknown): boolean => {
  const code = codeOf(error)
  if (code !== undefined && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))) return true
  const message = messageOf(error).toLowerCase()
  return message.includes("database is locked") || message.includes("database is busy")
}

/** A lock conflict still present when the ladder gave up. */
export class Locked {
  readonly _tag = "Locked"
  constructor(readonly cause: unknown) {}
}

/** The `locked` refusal: the file is held by another writer longer than the ladder waits. */
export const lockedError = (file: string, cause: unknown) =>
  new DatabaseOpenError({
    reason: "locked",
    target: file,
    message: `${file} is held by another process; gave up waiting after ${ladderAttempts} attempts`,
    cause
  })

/**
 * Map a driver throw met while opening an existing file to its refusal, or
 * `undefined` when it is not one of the recognised open failures.
 */
export const refusalOf = (file: string, error: unknown): DatabaseOpenError | undefined => {
  const code = codeOf(error) ?? ""
  if (code === "SQLITE_NOTADB") {
    return new DatabaseOpenError({
      reason: "not_a_database",
      target: file,
      message: `${file} is not a SQLite database`,
      cause: error
    })
  }
  if (code.startsWith("SQLITE_CORRUPT")) {
    return new DatabaseOpenError({
      reason: "corrupt",
      target: file,
      message: `${file} is a damaged SQLite database: ${messageOf(error)}`,
      cause: error
    })
  }
  if (code === "EACCES" || code === "EPERM" || code.startsWith("SQLITE_CANTOPEN") || code.startsWith("SQLITE_PERM")) {
    return new DatabaseOpenError({
      reason: "unreadable",
      target: file,
      message: `${file} cannot be opened: permission denied`,
      cause: error
    })
  }
  return undefined
}

/**
 * Run a driver step on the open ladder: lock conflicts are retried and become
 * `locked` when the ladder is exhausted; recognised open failures become their
 * refusal; anything else is `fallback`.
 */
export const onLadder = <A, R>(
  file: string,
  step: Effect.Effect<A, unknown, R>,
  fallback: (error: unknown) => DatabaseOpenError
): Effect.Effect<A, DatabaseOpenError, R> =>
  step.pipe(
    Effect.mapError((failure): Locked | DatabaseOpenError => {
      if (failure instanceof DatabaseOpenError) return failure
      const error = driverError(failure)
      return isLockError(error) ? new Locked(error) : refusalOf(file, error) ?? fallback(error)
    }),
    Effect.retry({ schedule: openLadder, while: (error) => error instanceof Locked }),
    Effect.mapError((error) => error instanceof Locked ? lockedError(file, error.cause) : error)
  )

/** The driver error inside an `SqlError`, or the value itself. */
const driverError = (error: unknown): unknown =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "SqlError"
    ? (error as { cause?: unknown }).cause
    : error

/** A synchronous driver call as a step for {@link onLadder}. */
const syncStep = <A>(f: () => A): Effect.Effect<A, unknown> => Effect.try({ try: f, catch: (error) => error })

const sqliteHeader = Buffer.from("SQLite format 3\u0000", "latin1")

/** Read up to 16 bytes: `undefined` for an empty file. */
const readHeader = (file: string): Buffer | undefined => {
  const fd = fs.openSync(file, "r")
  try {
    const buffer = Buffer.alloc(16)
    const read = fs.readSync(fd, buffer, 0, 16, 0)
    return read === 0 ? undefined : buffer.subarray(0, read)
  } finally {
    fs.closeSync(fd)
  }
}

const listTables = (file: string): ReadonlyArray<string> => {
  const db = new Sqlite(file, { readonly: true, fileMustExist: true })
  try {
    db.pragma("busy_timeout = 0")
    return db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
      .pluck()
      .all() as ReadonlyArray<string>
  } finally {
    db.close()
  }
}

const unexpected = (file: string) => (error: unknown) =>
  new DatabaseOpenError({
    reason: "unreadable",
    target: file,
    message: `${file} cannot be opened: ${messageOf(error)}`,
    cause: error
  })

/**
 * Inspect an existing file before anything writes to it. A non-empty file
 * without the SQLite header is `not_a_database` (so a stray file is never
 * converted to WAL); a database with tables but no ledger is
 * `foreign_database`. An empty file is a new database and passes.
 */
export const inspect = (file: string): Effect.Effect<void, DatabaseOpenError> =>
  Effect.gen(function*() {
    const header = yield* Effect.try({
      try: () => readHeader(file),
      catch: (error) => refusalOf(file, error) ?? unexpected(file)(error)
    })
    if (header === undefined) return
    if (header.length < 16 || !header.equals(sqliteHeader)) {
      return yield* new DatabaseOpenError({
        reason: "not_a_database",
        target: file,
        message: `${file} is not a SQLite database`
      })
    }
    const tables = yield* onLadder(file, syncStep(() => listTables(file)), unexpected(file))
    if (tables.length > 0 && !tables.includes(ledgerTable)) {
      return yield* new DatabaseOpenError({
        reason: "foreign_database",
        target: file,
        message: `${file} already holds another application's tables (no ${ledgerTable} ledger); choose a new file`
      })
    }
  })

/**
 * Make a read-write database WAL. Conversion needs the file to itself (a
 * peer's read lock blocks it), hence the ladder; busy timeout 0 so a waiting
 * open never blocks the event loop inside the driver.
 */
export const ensureWal = (file: string): Effect.Effect<void, DatabaseOpenError> =>
  onLadder(file, syncStep(() => {
    const db = new Sqlite(file, { fileMustExist: true })
    try {
      db.pragma("busy_timeout = 0")
      if (db.pragma("journal_mode", { simple: true }) !== "wal") {
        const mode = db.pragma("journal_mode = WAL", { simple: true })
        if (mode !== "wal") throw new Error(`journal_mode stayed ${String(mode)}`)
      }
    } finally {
      db.close()
    }
  }), unexpected(file))
