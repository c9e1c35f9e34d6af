/**
 * The first two steps of the SQLite open sequence (`sqliteFileOpen.ts`): admit the filename,
 * then make sure a regular file exists there (creating parents and the file
 * for read-write opens).
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { DatabaseOpenError } from "../DatabaseOpenError.js"
import { isRefusal, parsePgUrl } from "./pgUrl.js"

const refuse = (reason: DatabaseOpenError["reason"], target: string, message: string, cause?: unknown) =>
  new DatabaseOpenError(cause === undefined ? { reason, target, message } : { reason, target, message, cause })

/**
 * Validate `filename` and resolve it against the working directory. Empty
 * paths, NUL bytes, `:memory:`, `file:` URIs and `scheme://` URLs are refused.
 */
export const resolveFilename = (filename: string): Effect.Effect<string, DatabaseOpenError> =>
  Effect.suspend(() => {
    if (filename.length === 0 || filename.includes("\u0000")) {
      return Effect.fail(
        refuse("invalid_path", filename, "SQLite database path is empty or contains a NUL byte")
      )
    }
    const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(filename)?.[1]?.toLowerCase()
    if (scheme === "postgres" || scheme === "postgresql") {
      const parsed = parsePgUrl(filename)
      const target = isRefusal(parsed) ? `${scheme}://…` : parsed.redacted
      return Effect.fail(refuse("wrong_dialect", target, `${target} is a PostgreSQL URL; open it with PgDatabase.layer`))
    }
    if (filename === ":memory:" || /^file:/i.test(filename) || scheme !== undefined) {
      return Effect.fail(
        refuse(
          "invalid_path",
          filename,
          `SqliteDatabase opens files by plain path; "${filename}" is not one (use TestDatabase.layer for an in-memory database)`
        )
      )
    }
    return Effect.succeed(path.resolve(filename))
  })

/** How the file at the resolved path looked before the open touched it. */
export type FileState = "existing" | "created"

const errnoCode = (error: unknown): string =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : "unknown error"

const statOrUndefined = (file: string): fs.Stats | undefined => {
  try {
    return fs.statSync(file)
  } catch (error) {
    // ENOTDIR: a path component is a file; nothing can exist below it.
    if (errnoCode(error) === "ENOENT" || errnoCode(error) === "ENOTDIR") return undefined
    throw error
  }
}

/** Like `statOrUndefined`, treating an unreadable parent as missing (mkdir then reports why). */
const statOrUndefinedSafe = (dir: string): fs.Stats | undefined => {
  try {
    return statOrUndefined(dir)
  } catch {
    return undefined
  }
}

const permissionDenied = (file: string, cause: unknown) =>
  refuse("unreadable", file, `${file} cannot be opened: permission denied`, cause)

/**
 * Stat the path and, for read-write opens, create what is missing: parent
 * directories (`0o700`, when `createDirectory`) and the file itself, created
 * exclusively with `mode`. A read-only open never creates anything.
 */
export const ensureFile = (file: string, options: {
  readonly readOnly: boolean
  readonly createDirectory: boolean
  readonly mode: number
}): Effect.Effect<FileState, DatabaseOpenError> =>
  Effect.try({
    try: (): FileState | DatabaseOpenError => {
      let stats: fs.Stats | undefined
      try {
        stats = statOrUndefined(file)
      } catch (error) {
        return errnoCode(error) === "EACCES" ? permissionDenied(file, error) : refuse(
          "unreadable",
          file,
          `${file} cannot be opened: ${errnoCode(error)}`,
          error
        )
      }
      if (stats !== undefined) {
        if (stats.isDirectory()) return refuse("not_a_file", file, `${file} is a directory, not a database file`)
        if (!stats.isFile()) return refuse("not_a_file", file, `${file} is not a regular file`)
        try {
          fs.accessSync(file, options.readOnly ? fs.constants.R_OK : fs.constants.R_OK | fs.constants.W_OK)
        } catch (error) {
          return permissionDenied(file, error)
        }
        return "existing"
      }
      if (options.readOnly) {
        return refuse("not_found", file, `${file} does not exist; a read-only open never creates a database`)
      }
      const dir = path.dirname(file)
      if (statOrUndefinedSafe(dir) === undefined) {
        if (!options.createDirectory) return refuse("not_found", file, `${file} does not exist`)
        try {
          fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
        } catch (error) {
          return refuse(
            "invalid_path",
            file,
            `cannot create directory ${dir} for database ${file}: ${errnoCode(error)}`,
            error
          )
        }
      }
      try {
        fs.closeSync(fs.openSync(file, "wx", options.mode))
        return "created"
      } catch (error) {
        const code = errnoCode(error)
        // Another process created it between our stat and open: open what it made.
        if (code === "EEXIST") return "existing"
        if (code === "EACCES") return permissionDenied(file, error)
        return refuse("invalid_path", file, `cannot create database ${file}: ${code}`, error)
      }
    },
    catch: (error) => refuse("unreadable", file, `${file} cannot be opened: ${errnoCode(error)}`, error)
  }).pipe(Effect.flatMap((result) => typeof result === "string" ? Effect.succeed(result) : Effect.fail(result)))
