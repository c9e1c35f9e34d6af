/**
 * The migration ledger `flows_migrations` (docs/design/migrations.md): composes several packages'
 * migration sets, each in its own block of 1000 ids, into one ordered, idempotent,
 * append-only pass that runs as one schema-wide write and refuses databases ahead of
 * the code.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Dialect from "./Dialect.js"
import * as DurableWriter from "./DurableWriter.js"
import * as ClientInfo from "./internal/clientInfo.js"
import * as Ledger from "./internal/ledger.js"
import * as PgJsonValid from "./internal/pgJsonValid.js"
import * as RetryPolicy from "./internal/retryPolicy.js"

/**
 * The ledger table's name.
 *
 * @since 0.1.0
 * @category constants
 */
export const table = "flows_migrations" as const

/**
 * Size of one set's id block: a set with `idOffset` o owns ids o+1 … o+999.
 *
 * @since 0.1.0
 * @category constants
 */
export const idBlock = 1000 as const

/**
 * One package's migrations. Keys are `"<digits>_<name>"` (`name` in `[a-z0-9_]+`,
 * local id 1..999); the global id is `idOffset + localId`.
 *
 * @since 0.1.0
 * @category models
 */
export interface MigrationSet {
  /** `/^[a-z][a-z0-9-]{0,39}$/`, unique per composition. */
  readonly namespace: string
  /** Non-negative safe multiple of 1000, unique per composition. */
  readonly idOffset: number
  readonly migrations: Readonly<Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>>>
}

/**
 * A migration's identity; rendered as `<id> (<namespace>_<name>)`.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppliedMigration {
  readonly id: number
  readonly namespace: string
  readonly name: string
}

/**
 * What `status` found.
 *
 * @since 0.1.0
 * @category models
 */
export interface MigrationStatus {
  /** Recorded and declared. */
  readonly applied: ReadonlyArray<AppliedMigration>
  /** Declared, not recorded. */
  readonly pending: ReadonlyArray<AppliedMigration>
  /** Recorded in blocks no composed set claims (left alone). */
  readonly foreign: ReadonlyArray<AppliedMigration>
}

/**
 * Why a pass refused or failed.
 *
 * @since 0.1.0
 * @category errors
 */
export const MigrationErrorReason = Schema.Literal("invalid_set", "ahead", "history_mismatch", "hole", "failed")

/**
 * @since 0.1.0
 * @category errors
 */
export type MigrationErrorReason = typeof MigrationErrorReason.Type

/**
 * A refused or failed ledger pass; nothing of the pass remains in the database.
 * `message` is a sentence for people; `migrationId` names the migration concerned.
 *
 * @since 0.1.0
 * @category errors
 */
export class MigrationError extends Schema.TaggedError<MigrationError>()("@baton/database/MigrationError", {
  reason: MigrationErrorReason,
  message: Schema.String,
  migrationId: Schema.optional(Schema.Number),
  cause: Schema.optional(Schema.Defect)
}) {}

const render = (m: AppliedMigration): string => `${m.id} (${m.namespace}_${m.name})`

const causeText = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  // An SqlError's own message is generic; the driver's says what went wrong.
  const inner = typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "SqlError"
    ? (error as { cause?: unknown }).cause ?? error
    : error
  if (typeof inner === "object" && inner !== null && typeof (inner as { message?: unknown }).message === "string") {
    return (inner as { message: string }).message
  }
  return String(inner)
}

const ledgerTableExists = (sql: SqlClient.SqlClient) =>
  Effect.map(Dialect.tables(sql), (names) => names.includes(table))

const readLedger = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly migration_id: number | string; readonly namespace: string; readonly name: string }>`
      SELECT migration_id, namespace, name FROM flows_migrations ORDER BY migration_id`,
    (rows) =>
      rows
        .map((row): AppliedMigration => ({ id: Number(row.migration_id), namespace: row.namespace, name: row.name }))
        .sort((a, b) => a.id - b.id)
  )

const fail = (reason: MigrationErrorReason, message: string, migrationId?: number) =>
  Effect.fail(
    new MigrationError(migrationId === undefined ? { reason, message } : { reason, message, migrationId })
  )

const verify = (plan: Ledger.Plan, recorded: ReadonlyArray<AppliedMigration>, refuseHoles: boolean) =>
  Effect.suspend(() => {
    const result = Ledger.verify(plan, recorded)
    if (result._tag === "Refused") return fail(result.reason, result.message, result.migrationId)
    if (refuseHoles && result.hole !== undefined) {
      return fail("hole", result.hole.message, result.hole.migrationId)
    }
    return Effect.succeed(result)
  })

const ensureLedger = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const integer = Dialect.integer(sql)
    yield* sql`CREATE TABLE IF NOT EXISTS flows_migrations (
      migration_id ${integer} PRIMARY KEY CHECK (migration_id > 0),
      namespace TEXT NOT NULL CHECK (length(namespace) > 0),
      name TEXT NOT NULL CHECK (length(name) > 0),
      applied_at_ms ${integer} NOT NULL
    )`
    if (Dialect.isPostgres(sql)) yield* PgJsonValid.ensure(sql, ClientInfo.get(sql)?.pgSchema)
  })

/** The current PostgreSQL transaction's id (a statement outside a transaction gets a new one each time). */
const currentTransactionId = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ readonly id: string }>`SELECT txid_current()::text AS id`, (rows) => rows[0]?.id)

/** Busy inside a migration replays the whole pass; any other failure is `failed`. */
const applyOne = (
  migration: Ledger.Declared
): Effect.Effect<void, MigrationError | DurableWriter.DatabaseError, SqlClient.SqlClient> =>
  Effect.catchAllCause(migration.effect, (cause): Effect.Effect<never, MigrationError | DurableWriter.DatabaseError> => {
    if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
    if (RetryPolicy.isRetryableCause(cause)) {
      return Effect.fail(new DurableWriter.DatabaseError({ code: "busy", cause: Cause.squash(cause) }))
    }
    return Effect.fail(
      new MigrationError({
        reason: "failed",
        message: `migration ${render(migration)} failed: ${causeText(cause)}`,
        migrationId: migration.id,
        cause: Cause.squash(cause)
      })
    )
  })

/**
 * Check a composition of sets without a database: every namespace matches
 * `/^[a-z][a-z0-9-]{0,39}$/` and is unique, every `idOffset` is a non-negative
 * multiple of 1000 used once, `migrations` is a record of `"<1..999>_<name>"`
 * keys (one per local id) to Effects. Returns the `invalid_set` error {@link run}
 * would fail with, or `undefined`, so a host can refuse bad sets before it opens
 * (creates) a database.
 *
 * @since 0.1.0
 * @category ledger
 */
export const validate = (sets: ReadonlyArray<MigrationSet>): MigrationError | undefined => {
  const planned = Ledger.plan(sets)
  return planned._tag === "Invalid" ? new MigrationError({ reason: "invalid_set", message: planned.message }) : undefined
}

/**
 * Apply every pending migration of `sets` in ascending global id, in one schema-wide
 * write (SQLite `BEGIN IMMEDIATE`, PostgreSQL exclusive schema lock), replayed on
 * `busy` with `options.retry` or the writer defaults. Returns what it applied (`[]`
 * when nothing was pending). Refusals (`invalid_set`, `ahead`, `history_mismatch`,
 * `hole`) and a migration's failure (`failed`) roll the whole pass back, except what a
 * PostgreSQL migration committed itself (a `COMMIT` in its SQL fails the pass right
 * after that migration, `failed` naming it). On a
 * read-only client nothing is written: refusals are still reported, pending
 * migrations are not an error, and the result is `[]`.
 *
 * @since 0.1.0
 * @category ledger
 */
export const run = (
  sets: ReadonlyArray<MigrationSet>,
  options?: { readonly retry?: DurableWriter.WriteRetryOptions }
): Effect.Effect<ReadonlyArray<AppliedMigration>, MigrationError | DurableWriter.DatabaseError, SqlClient.SqlClient> => {
  // Snapshot now: later changes to the sets do not change this pass.
  const planned = Ledger.plan(sets)
  return Effect.gen(function*() {
    if (planned._tag === "Invalid") return yield* fail("invalid_set", planned.message)
    const plan = planned.plan
    const sql = yield* SqlClient.SqlClient
    if (ClientInfo.isReadOnly(sql)) {
      const exists = yield* ledgerTableExists(sql).pipe(Effect.mapError(DurableWriter.fromSqlError))
      if (!exists) return []
      const recorded = yield* readLedger(sql).pipe(Effect.mapError(DurableWriter.fromSqlError))
      yield* verify(plan, recorded, true)
      return []
    }
    const writer = DurableWriter.make(sql, options?.retry)
    return yield* writer.write(Effect.gen(function*() {
      yield* ensureLedger(sql)
      const recorded = yield* readLedger(sql)
      const verified = yield* verify(plan, recorded, true)
      const applied: Array<AppliedMigration> = []
      const pg = Dialect.isPostgres(sql)
      // PostgreSQL runs several statements of one unparameterized query, so a migration could
      // `COMMIT` the pass's transaction itself; the transaction id tells (one read per migration).
      const transactionId = pg ? yield* currentTransactionId(sql) : undefined
      for (const migration of verified.pending) {
        yield* applyOne(migration)
        if (pg && (yield* currentTransactionId(sql)) !== transactionId) {
          return yield* Effect.fail(
            new MigrationError({
              reason: "failed",
              message: `migration ${
                render(migration)
              } ended the pass's transaction itself (a COMMIT or ROLLBACK in its SQL): what it committed stays, nothing after it ran; remove the transaction control from the migration`,
              migrationId: migration.id
            })
          )
        }
        const now = yield* Clock.currentTimeMillis
        yield* sql`INSERT INTO flows_migrations (migration_id, namespace, name, applied_at_ms)
          VALUES (${migration.id}, ${migration.namespace}, ${migration.name}, ${now})`
        applied.push({ id: migration.id, namespace: migration.namespace, name: migration.name })
      }
      return applied
    }))
  })
}

/**
 * `run(sets)` as a layer: build it below the stores (`Layer.provideMerge`) so they
 * start on a migrated database.
 *
 * @since 0.1.0
 * @category ledger
 */
export const layer = (
  sets: ReadonlyArray<MigrationSet>
): Layer.Layer<never, MigrationError | DurableWriter.DatabaseError, SqlClient.SqlClient> =>
  Layer.effectDiscard(run(sets))

/**
 * Read the ledger without creating or changing anything. Fails on `invalid_set`,
 * `history_mismatch` and `ahead`; pending migrations (also those below an applied one)
 * are reported, not refused.
 *
 * @since 0.1.0
 * @category ledger
 */
export const status = (
  sets: ReadonlyArray<MigrationSet>
): Effect.Effect<MigrationStatus, MigrationError | DurableWriter.DatabaseError, SqlClient.SqlClient> => {
  const planned = Ledger.plan(sets)
  return Effect.gen(function*() {
    if (planned._tag === "Invalid") return yield* fail("invalid_set", planned.message)
    const sql = yield* SqlClient.SqlClient
    const exists = yield* ledgerTableExists(sql).pipe(Effect.mapError(DurableWriter.fromSqlError))
    const recorded = exists ? yield* readLedger(sql).pipe(Effect.mapError(DurableWriter.fromSqlError)) : []
    const verified = yield* verify(planned.plan, recorded, false)
    const strip = (m: AppliedMigration): AppliedMigration => ({ id: m.id, namespace: m.namespace, name: m.name })
    return {
      applied: verified.applied.map(strip),
      pending: verified.pending.map(strip),
      foreign: verified.foreign.map(strip)
    }
  })
}
