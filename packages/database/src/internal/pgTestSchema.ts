/**
 * Dropping a throwaway test schema (`TestDatabase.layerPostgres`).
 *
 * @internal
 */
import { Effect } from "effect"
import Pg from "pg"
import { schemaLockExclusiveSql } from "./intentionLocks.js"
import { schemaPattern } from "./pgUrl.js"

/** How long the drop waits for a write still holding the schema's locks. */
const lockTimeout = "30s"

/**
 * `DROP SCHEMA … CASCADE` on a dedicated connection, inside a transaction that
 * first takes the schema lock exclusively: a transaction still running on the
 * schema commits before the drop instead of deadlocking with it. Never fails:
 * a drop that goes wrong is logged (the schema is a leak, not a test failure).
 */
export const drop = (connectionString: string, schema: string): Effect.Effect<void> =>
  Effect.tryPromise(async () => {
    if (!schemaPattern.test(schema)) throw new Error(`refusing to drop schema ${JSON.stringify(schema)}`)
    const client = new Pg.Client({ connectionString, application_name: "baton-test-drop" })
    client.on("error", () => {})
    await client.connect()
    try {
      await client.query("BEGIN")
      await client.query(`SET LOCAL lock_timeout = '${lockTimeout}'`)
      await client.query(schemaLockExclusiveSql, [schema])
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      await client.query("COMMIT")
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined)
      throw error
    } finally {
      await client.end().catch(() => undefined)
    }
  }).pipe(
    Effect.catchAll((error) => Effect.logWarning(`TestDatabase: could not drop schema ${schema}`, error.error)),
    Effect.uninterruptible
  )
