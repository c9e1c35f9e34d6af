/**
 * One SQLite file as Baton's database: the open checks and refusals that keep
 * a foreign or damaged file untouched, WAL, foreign keys, `BEGIN IMMEDIATE` write transactions and busy
 * timeout 0, so a writer waiting for another process's lock backs off through
 * `DurableWriter` instead of blocking the Node event loop. Node only.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Layer } from "effect"
import type { DatabaseOpenError } from "./DatabaseOpenError.js"
import * as DurableWriter from "./DurableWriter.js"
import { openFile } from "./internal/sqliteFileOpen.js"

/**
 * Options of a SQLite file database.
 *
 * - `filename`: a filesystem path (relative paths resolve against `process.cwd()`);
 *   `:memory:`, `file:` URIs and URLs are refused (`invalid_path`, `wrong_dialect`).
 * - `readOnly`: open an existing database without creating or converting anything;
 *   writes fail `read_only`. Default `false`.
 * - `busyTimeout`: SQLite's busy timeout. Default 0 for read-write clients (waiting
 *   writers back off asynchronously) and 1 second for read-only ones.
 * - `mode`: permissions of a newly created file. Default `0o600` (the database
 *   holds unredacted run inputs).
 * - `createDirectory`: create missing parent directories (`0o700`) on a read-write
 *   open. Default `true`.
 * - `writer`: retry options of the layer's `DurableWriter`.
 *
 * Options of the wrong type or range (a non-string `filename`, a negative or
 * non-finite `busyTimeout`, a `mode` outside 0..0o7777, a non-boolean flag, bad
 * `writer` options) fail the open with `invalid_path` (the closest reason of
 * `DatabaseOpenReason`) whose message names the option and the rule, e.g.
 * `SqliteDatabase option writer.maxAttempts: must be a positive safe integer (got -1)`;
 * nothing is created.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteDatabaseOptions {
  readonly filename: string
  readonly readOnly?: boolean
  readonly busyTimeout?: Duration.DurationInput
  readonly mode?: number
  readonly createDirectory?: boolean
  readonly writer?: DurableWriter.WriteRetryOptions
}

/**
 * The `SqlClient` over one SQLite file, without a writer. Fails with
 * `DatabaseOpenError` (reasons `invalid_path`, `wrong_dialect`, `not_found`,
 * `not_a_file`, `unreadable`, `not_a_database`, `corrupt`, `foreign_database`,
 * `locked`) before anything is written to a refused file. Closing the scope
 * closes the connection.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient = (options: SqliteDatabaseOptions): Layer.Layer<SqlClient.SqlClient, DatabaseOpenError> =>
  Layer.scoped(SqlClient.SqlClient, openFile(options))

/**
 * The `SqlClient` over one SQLite file plus a `DurableWriter` on it (with
 * `options.writer`). Refusals as in {@link layerClient}.
 *
 * @example
 * ```ts
 * Layer.provideMerge(Migrations.layer(sets), SqliteDatabase.layer({ filename: "./baton.db" }))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: SqliteDatabaseOptions
): Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, DatabaseOpenError> =>
  Layer.provideMerge(
    Layer.effect(
      DurableWriter.DurableWriter,
      Effect.map(SqlClient.SqlClient, (sql) => DurableWriter.make(sql, options.writer))
    ),
    layerClient(options)
  )
