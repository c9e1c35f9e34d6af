/**
 * Test databases: a fresh in-memory SQLite database per layer build,
 * and helpers for PostgreSQL suites. Node-only.
 *
 * @since 0.1.0
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { randomBytes } from "node:crypto"
import type { DatabaseOpenError } from "./DatabaseOpenError.js"
import * as DurableWriter from "./DurableWriter.js"
import * as PgTestSchema from "./internal/pgTestSchema.js"
import * as SqliteClient from "./internal/sqliteClient.js"
import * as PgDatabase from "./PgDatabase.js"

/**
 * An in-memory SQLite database private to this build, with the file layer's production
 * transaction driver (`BEGIN IMMEDIATE`) and connection pragmas (`foreign_keys = ON`,
 * `busy_timeout = 0`) and a writer using `options.writer` (retry tests use
 * `{ baseDelayMs: 1, maxDelayMs: 1 }`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (options: {
  readonly writer?: DurableWriter.WriteRetryOptions
}): Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter> =>
  Layer.scopedContext(Effect.gen(function*() {
    const client = yield* SqliteClient.make({ filename: ":memory:", disableWAL: true })
    // The file layer's pragmas and default busy timeout, so tests see what production sees.
    yield* Effect.orDie(SqliteClient.configure(client, SqliteClient.busyTimeoutMs(undefined, false)))
    return Context.make(SqlClient.SqlClient, client).pipe(
      Context.add(DurableWriter.DurableWriter, DurableWriter.make(client, options.writer))
    )
  })).pipe(Layer.provide(Reactivity.layer))

/**
 * An in-memory SQLite database with the default writer. Each build is a fresh, empty
 * database shared by all fibers of that build: provide it per test for isolation.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter> = layerWith({})

/**
 * The PostgreSQL test URL from the config `BATON_TEST_PG_URL`, if set.
 *
 * @since 0.1.0
 * @category postgres
 */
export const postgresUrl: Effect.Effect<Option.Option<Redacted.Redacted<string>>> = Config.option(
  Config.redacted("BATON_TEST_PG_URL")
).pipe(
  Effect.map(Option.filter((url) => url.toString().length > 0)),
  Effect.orElseSucceed(() => Option.none())
)

/**
 * Synchronously read `BATON_TEST_PG_URL` for a PostgreSQL suite. When it is unset or
 * empty, prints `PostgreSQL suite skipped: <suite> (BATON_TEST_PG_URL is unset)` to
 * stderr and returns `undefined`; suites use `describe.skipIf(url === undefined)`.
 *
 * @since 0.1.0
 * @category postgres
 */
export const postgresTestUrl = (suite: string): string | undefined => {
  const url = process.env["BATON_TEST_PG_URL"]
  if (url === undefined || url.length === 0) {
    process.stderr.write(`PostgreSQL suite skipped: ${suite} (BATON_TEST_PG_URL is unset)\n`)
    return undefined
  }
  return url
}

/**
 * `PgDatabase.layer` over a fresh schema `test_<32 hex>` of the server at `url`,
 * for one test suite. At scope close the schema is dropped (`DROP SCHEMA … CASCADE`)
 * in a transaction that first takes the schema lock exclusively, so a write still in
 * flight finishes before the drop instead of deadlocking with it. Fails with
 * `DatabaseOpenError` like `PgDatabase.layer`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPostgres = (
  url: string | Redacted.Redacted<string>
): Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, DatabaseOpenError> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    // Crypto randomness, not Effect's Random: test files run in parallel processes and
    // a seeded generator would hand two suites the same schema.
    const schema = `test_${randomBytes(16).toString("hex")}`
    const connectionString = Redacted.isRedacted(url) ? Redacted.value(url) : url
    // Registered before the database layer is built, so it runs after that layer closed.
    yield* Effect.addFinalizer(() => PgTestSchema.drop(connectionString, schema))
    return PgDatabase.layer({ url, schema })
  }))
