/**
 * The raw drivers the benches compare Baton with, loaded as the database package loads them (the
 * root package does not depend on them), and a node-postgres client on one schema.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Effect } from "effect"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type * as Pg from "pg"

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const requireDriver = createRequire(path.join(repoRoot, "packages", "database", "package.json"))

/** better-sqlite3's constructor. */
export const betterSqlite3 = (): typeof BetterSqlite3 => requireDriver("better-sqlite3") as typeof BetterSqlite3

/** A connected node-postgres client whose `search_path` is `schema`, ended when the scope closes. */
export const pgClient = (url: string, schema: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const pg = requireDriver("pg") as typeof Pg
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      await client.query(`SET search_path TO "${schema}"`)
      return client
    }),
    (client) => Effect.promise(() => client.end())
  )
