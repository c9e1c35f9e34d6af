/**
 * Throwaway PostgreSQL schemas for the node suites: a fresh name, dropped when the test ends.
 */
import * as PgDatabase from "@baton/database/PgDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, type ManagedRuntime, type Scope } from "effect"
import * as crypto from "node:crypto"

/** A fresh schema name `node_<hex>`. */
export const freshName = (): string => `node_${crypto.randomBytes(12).toString("hex")}`

/** A fresh schema name whose schema is dropped (if created) when the scope closes. */
export const throwaway = (url: string): Effect.Effect<string, never, Scope.Scope> =>
  Effect.gen(function*() {
    const schema = freshName()
    yield* Effect.addFinalizer(() =>
      Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(PgDatabase.layer({ url, schema }))
        yield* Context.get(context, SqlClient.SqlClient).unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      })).pipe(Effect.ignore)
    )
    return schema
  })

/** Drop `schema` through a runtime's client (errors ignored), then dispose of the runtime. */
export const dropAndDispose = async (
  runtime: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>,
  schema: string
): Promise<void> => {
  await runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)))
    .catch(() => undefined)
  await runtime.dispose()
}

/** Drop `schema` at `url` if it exists (errors ignored): for schemas another process made. */
export const dropSchema = (url: string, schema: string): Promise<void> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(PgDatabase.layer({ url, schema }))
    yield* Context.get(context, SqlClient.SqlClient).unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  })).pipe(Effect.ignore))
