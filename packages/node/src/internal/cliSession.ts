/**
 * How a CLI verb reaches the database: global options, the pre-flight checks that keep
 * read verbs from creating anything, the optional flow catalog (`--config`), and the client-mode
 * `NodeRuntime` every verb runs in.
 */
import * as ControlMigrations from "@baton/control/Migrations"
import * as Migrations from "@baton/database/Migrations"
import type * as ApprovalAuthority from "@baton/control/ApprovalAuthority"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { pathToFileURL } from "node:url"
import type * as Flow from "../Flow.js"
import * as NodeRuntime from "../NodeRuntime.js"
import * as RuntimeOptions from "./runtimeOptions.js"
import { checkPgUrl, CliFailure, wrongDialect } from "./cliFailure.js"
import * as Parse from "./cliParse.js"

/** Options every verb accepts, already resolved against the environment. */
export interface Globals {
  readonly json: boolean
  readonly db: string | undefined
  readonly pg: string | undefined
  readonly schema: string | undefined
  readonly lockWaitMs: number
  readonly config: string | undefined
  readonly as: string | undefined
}

/** Raw option values as @effect/cli hands them over. */
export interface RawGlobals {
  readonly json: boolean
  readonly db: string | undefined
  readonly pg: string | undefined
  readonly schema: string | undefined
  readonly lockWait: string | undefined
  readonly config: string | undefined
  readonly as: string | undefined
}

/** Resolves flags and environment (`BATON_DB`, `BATON_PG_URL`, `BATON_CONFIG`); `--db` with `--pg` is usage. */
export const resolveGlobals = (raw: RawGlobals, env: NodeJS.ProcessEnv = process.env): Globals => {
  if (raw.db !== undefined && raw.pg !== undefined) {
    throw new CliFailure({ exitCode: 2, code: "usage", message: "--db and --pg are mutually exclusive; pass one database" })
  }
  if (raw.db !== undefined && raw.db.trim().length === 0) {
    throw new CliFailure({ exitCode: 2, code: "usage", message: "--db must name a SQLite database file, got an empty path" })
  }
  const pg = raw.pg ?? (raw.db === undefined ? nonEmpty(env["BATON_PG_URL"]) : undefined)
  if (pg !== undefined) checkPgUrl(pg)
  const db = pg === undefined ? raw.db ?? nonEmpty(env["BATON_DB"]) ?? "./baton.db" : undefined
  if (raw.schema !== undefined) checkSchema(raw.schema, pg !== undefined)
  return {
    json: raw.json,
    db,
    pg,
    schema: raw.schema,
    lockWaitMs: raw.lockWait === undefined ? 5_000 : Parse.durationMs("--lock-wait", raw.lockWait),
    config: raw.config ?? nonEmpty(env["BATON_CONFIG"]),
    as: raw.as
  }
}

/** PostgreSQL schema names the database package accepts (`PgDatabaseOptions.schema`). */
const schemaPattern = /^[a-z_][a-z0-9_]{0,62}$/

/** `--schema` names a PostgreSQL schema: usage (2) on SQLite, or when the name is malformed. */
const checkSchema = (schema: string, postgres: boolean): void => {
  if (!postgres) {
    throw new CliFailure({
      exitCode: 2,
      code: "usage",
      message: "--schema applies to PostgreSQL only; a SQLite database (--db) has no schemas",
      hint: "pass --pg <url> with --schema, or drop --schema"
    })
  }
  if (!schemaPattern.test(schema)) {
    throw new CliFailure({
      exitCode: 2,
      code: "usage",
      message: `--schema must be 1 to 63 characters of a-z, 0-9 and _, not starting with a digit; got ${JSON.stringify(schema)}`
    })
  }
}

const nonEmpty = (s: string | undefined): string | undefined => (s === undefined || s.length === 0 ? undefined : s)

/** `input` as a URL with its password replaced by `***`; `undefined` when it does not parse. */
const redactedUrl = (input: string): string | undefined => {
  try {
    const url = new URL(input)
    if (url.password !== "") url.password = "***"
    return url.toString()
  } catch {
    return undefined
  }
}

/** Where the verb points, for messages: the absolute file path or the redacted URL and schema. */
export const location = (globals: Globals): string => {
  if (globals.pg !== undefined) {
    const url = redactedUrl(globals.pg)
    return url === undefined ? "the PostgreSQL URL" : `${url} (schema ${globals.schema ?? "baton"})`
  }
  return nodePath.resolve(globals.db ?? "./baton.db")
}

/** What `--config` loads: the host's catalog. */
export interface Catalog {
  readonly flows?: ReadonlyArray<Flow.Any>
  readonly migrations?: ReadonlyArray<Migrations.MigrationSet>
  readonly approvalAuthority?: ApprovalAuthority.Service
  readonly principal?: { readonly id: string; readonly kind: string }
}

/** Loads `--config` / `BATON_CONFIG` / `baton.config.mjs|.js` in the working directory; none → `undefined`. */
export const loadCatalog = (globals: Globals): Effect.Effect<Catalog | undefined, CliFailure> => {
  const explicit = globals.config
  const candidates = explicit !== undefined
    ? [nodePath.resolve(explicit)]
    : ["baton.config.mjs", "baton.config.js"].map((f) => nodePath.resolve(f)).filter((f) => fs.existsSync(f))
  const file = candidates[0]
  if (file === undefined) return Effect.succeed(undefined)
  return Effect.tryPromise({
    try: () => import(pathToFileURL(file).href) as Promise<Record<string, unknown>>,
    catch: (error) =>
      new CliFailure({
        exitCode: 2,
        code: "config",
        message: `cannot load the flow catalog ${file}: ${error instanceof Error ? error.message : String(error)}`
      })
  }).pipe(
    Effect.map((module) => (module["default"] ?? module) as Catalog),
    Effect.tap((catalog) => checkCatalog(file, catalog))
  )
}

/** A loaded catalog with a wrong shape is a config that fails to load (exit 2), naming the field. */
const checkCatalog = (file: string, catalog: Catalog) =>
  Effect.gen(function*() {
    if (typeof catalog !== "object" || catalog === null) {
      return yield* invalidCatalog(file, "the module must export flows, migrations, approvalAuthority or principal")
    }
    if (catalog.flows !== undefined) yield* RuntimeOptions.validateCatalog(catalog.flows)
    if (catalog.migrations !== undefined) yield* RuntimeOptions.validateMigrations(catalog.migrations)
    yield* RuntimeOptions.validatePrincipal(catalog.principal)
    const authority = catalog.approvalAuthority
    if (authority !== undefined && (typeof authority !== "object" || authority === null)) {
      return yield* invalidCatalog(file, "approvalAuthority: must be an ApprovalAuthority service object")
    }
  }).pipe(Effect.catchTag("@baton/node/NodeRuntimeError", (error) => invalidCatalog(file, error.message)))

const invalidCatalog = (file: string, message: string) =>
  Effect.fail(new CliFailure({ exitCode: 2, code: "config", message: `invalid flow catalog ${file}: ${message}` }))

/** The library migration sets every Baton database composes, before the application's. */
export const librarySets = RuntimeOptions.librarySets

/** How a verb opens the database. */
export type Access = "read" | "write"

/**
 * SQLite pre-flight: a missing file is exit 5 for every verb (nothing is created); a 0-byte file is an
 * empty database (answered `"empty"` for reads, initialised by writes).
 */
export const preflight = (globals: Globals, access: Access): "ok" | "empty" => {
  if (globals.pg !== undefined) return "ok"
  if (globals.db !== undefined && /^postgres(?:ql)?:\/\//i.test(globals.db)) {
    throw wrongDialect(redactedUrl(globals.db) ?? "the PostgreSQL URL", "")
  }
  const path = location(globals)
  let stat: fs.Stats
  try {
    stat = fs.statSync(path)
  } catch {
    throw new CliFailure({
      exitCode: 5,
      code: "not_found",
      message: `no database at ${path}`,
      hint: "a host creates it (pnpm start), or pass --db <file>"
    })
  }
  if (stat.isFile() && stat.size === 0 && access === "read") return "empty"
  return "ok"
}

/** A 0-byte SQLite file: an empty database the first write initialises. */
export const isEmptyFile = (globals: Globals): boolean => {
  if (globals.pg !== undefined) return false
  try {
    const stat = fs.statSync(location(globals))
    return stat.isFile() && stat.size === 0
  } catch {
    return false
  }
}

/**
 * The catalog's application migration sets the CLI may apply or check on this database: a CLI must not add
 * another application's tables to a database. Only sets whose block the ledger already records, or all of
 * them on a database without any Baton ledger yet (the CLI initialises it for this catalog).
 * `ledger` is `Migrations.status(librarySets)` of the database (`None` when it could not be read: then the
 * verb's own open reports the problem).
 */
export const applicableSets = (
  sets: ReadonlyArray<Migrations.MigrationSet>,
  ledger: Option.Option<Migrations.MigrationStatus> | undefined
): ReadonlyArray<Migrations.MigrationSet> => {
  if (sets.length === 0 || ledger === undefined || Option.isNone(ledger)) return sets
  const status = ledger.value
  if (status.applied.length === 0 && status.foreign.length === 0) return sets
  const present = new Set(status.foreign.map((m) => m.namespace))
  return sets.filter((set) => present.has(set.namespace))
}

/** Writer retry options that give up after about `lockWaitMs` on a held lock. */
export const writerOptions = (lockWaitMs: number) => {
  const maxDelayMs = 250
  const baseDelayMs = 25
  return { baseDelayMs, maxDelayMs, maxAttempts: Math.max(2, Math.ceil(lockWaitMs / maxDelayMs) + 3) }
}

/** The client-mode runtime of one verb. */
export const layer = (globals: Globals, access: Access, catalog: Catalog | undefined) => {
  const common = {
    mode: "client" as const,
    readOnly: access === "read",
    flows: catalog?.flows ?? [],
    migrations: catalog?.migrations ?? [],
    writer: writerOptions(globals.lockWaitMs),
    ...(catalog?.approvalAuthority === undefined ? {} : { approvalAuthority: catalog.approvalAuthority }),
    ...(catalog?.principal === undefined ? {} : { principal: catalog.principal })
  }
  return globals.pg !== undefined
    ? NodeRuntime.layerPg({ ...common, url: globals.pg, ...(globals.schema === undefined ? {} : { schema: globals.schema }) })
    : NodeRuntime.layer({ ...common, filename: location(globals) })
}

/**
 * What the pending migrations of `status` mean: "an older Baton schema (n migrations pending)" when every
 * pending block is partly applied (docs/design/migrations.md); blocks with nothing applied are named as missing sets
 * ("lacks the control migration set"), since the database is not older but was composed without them.
 */
export const pendingText = (status: Migrations.MigrationStatus): string => {
  const count = (n: number) => `${n} ${n === 1 ? "migration" : "migrations"} pending`
  const missing = [...new Set(status.pending.map((m) => m.namespace))].filter((namespace) =>
    !status.applied.some((m) => m.namespace === namespace)
  )
  if (missing.length === 0) return `uses an older Baton schema (${count(status.pending.length)})`
  const sets = missing.length === 1 ? `the ${missing[0]} migration set` : `the ${missing.join(", ")} migration sets`
  return `lacks ${sets} (${count(status.pending.length)})`
}

/** A pending library migration whose absence every read tolerates (control's host presence table). */
const optionalForReads = (migration: Migrations.AppliedMigration): boolean =>
  migration.namespace === ControlMigrations.set.namespace && ControlMigrations.optionalForReads.includes(migration.id)

/**
 * Read verbs refuse a database whose Baton schema is older than this build (pending library
 * migrations), exit 5. Pending application migrations do not stop reads of Baton's own data, nor do
 * library migrations that reads tolerate missing (`doctor` still lists them under its ledger check).
 */
export const requireCurrentSchema = (globals: Globals) =>
  Migrations.status(librarySets).pipe(
    Effect.flatMap((status) =>
      status.pending.every(optionalForReads)
        ? Effect.void
        : Effect.fail(
          new CliFailure({
            exitCode: 5,
            code: "schema_older",
            message: `${location(globals)} ${pendingText(status)}; any mutating command or a host start ${
              pendingText(status).startsWith("uses an older") ? "upgrades it" : "applies them"
            }`
          })
        )
    )
  )
