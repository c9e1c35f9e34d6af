/**
 * Raw drivers (better-sqlite3, pg) for tests that must bypass the stores, loaded
 * from the database package that depends on them.
 */
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..")
const requireFromDatabase = createRequire(path.join(repoRoot, "packages", "database", "package.json"))

export const loadBetterSqlite3 = (): any => requireFromDatabase("better-sqlite3")
export const loadPg = (): any => requireFromDatabase("pg")
