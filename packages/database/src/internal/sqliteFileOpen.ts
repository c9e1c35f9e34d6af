/**
 * The SQLite file open sequence as one scoped effect (its steps are listed at `openFile`).
 *
 * @internal
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Cause, type Duration, Effect, Exit, Scope } from "effect"
import { DatabaseOpenError } from "../DatabaseOpenError.js"
import * as Options from "./options.js"
import * as SqliteClient from "./sqliteClient.js"
import { ensureFile, resolveFilename } from "./sqliteFilePath.js"
import { ensureWal, inspect, onLadder } from "./sqliteFileGuard.js"

/** What the open needs of `SqliteDatabaseOptions`. */
export interface OpenOptions {
  readonly filename: string
  readonly readOnly?: boolean
  readonly busyTimeout?: Duration.DurationInput
  readonly mode?: number
  readonly createDirectory?: boolean
}

const failure = (file: string) => (error: unknown) =>
  new DatabaseOpenError({
    reason: "unreadable",
    target: file,
    message: `${file} cannot be opened: ${error instanceof Error ? error.message : String(error)}`,
    cause: error
  })

/**
 * One attempt at building the driver client, in a scope of its own. The
 * upstream constructor throws synchronously (a defect); the throw becomes the
 * failure so the ladder can retry lock conflicts, and a failed attempt's scope
 * is closed so no connection leaks.
 */
const buildOnce = (file: string, readOnly: boolean) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const exit = yield* SqliteClient.make({ filename: file, readonly: readOnly, disableWAL: readOnly }).pipe(
      Scope.extend(scope),
      Effect.provide(Reactivity.layer),
      Effect.exit
    )
    if (Exit.isSuccess(exit)) return [scope, exit.value] as const
    yield* Scope.close(scope, exit)
    return yield* Effect.fail(Cause.squash(exit.cause))
  })

/**
 * Refuse options of the wrong type or range before anything is opened, as
 * `invalid_path` (the closest `DatabaseOpenError` reason: the open's configuration is
 * unusable), naming the option and the rule.
 */
const admitOptions = (options: OpenOptions): Effect.Effect<void, DatabaseOpenError> =>
  Effect.suspend(() => {
    const filename: unknown = options.filename
    if (typeof filename !== "string") {
      return Effect.fail(
        new DatabaseOpenError({
          reason: "invalid_path",
          target: String(filename),
          message: `SqliteDatabase option filename: must be a string path (got ${
            filename === null ? "null" : typeof filename
          })`
        })
      )
    }
    const problem = Options.sqliteProblem(options as unknown as Record<string, unknown>)
    return problem === undefined ? Effect.void : Effect.fail(
      new DatabaseOpenError({
        reason: "invalid_path",
        target: filename,
        message: `SqliteDatabase option ${problem.message}`
      })
    )
  })

/**
 * Open one SQLite file: validate the name, create or stat the file, inspect an
 * existing one before anything writes to it, convert to WAL (read-write), build
 * the client with the package's transaction driver (which also marks it), configure it.
 */
export const openFile = (options: OpenOptions): Effect.Effect<SqlClient.SqlClient, DatabaseOpenError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* admitOptions(options)
    const readOnly = options.readOnly ?? false
    const file = yield* resolveFilename(options.filename)
    const state = yield* ensureFile(file, {
      readOnly,
      createDirectory: options.createDirectory ?? true,
      mode: options.mode ?? 0o600
    })
    if (state === "existing") yield* inspect(file)
    if (!readOnly) yield* ensureWal(file)
    const [scope, sql] = yield* onLadder(file, buildOnce(file, readOnly), failure(file))
    yield* Effect.addFinalizer((exit) => Scope.close(scope, exit))
    yield* onLadder(file, SqliteClient.configure(sql, SqliteClient.busyTimeoutMs(options.busyTimeout, readOnly)), failure(file))
    return sql
  })
