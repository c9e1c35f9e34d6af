/**
 * Control's migration set: namespace `control`, block 2000 (ledger ids 2001–2999).
 *
 * @since 0.1.0
 */
import type { DatabaseError } from "@baton/database/DurableWriter"
import * as DatabaseMigrations from "@baton/database/Migrations"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Effect, Layer } from "effect"
import initial from "./migrations/0001_initial.js"
import hosts from "./migrations/0002_hosts.js"
import sequences from "./migrations/0003_sequences.js"
import queues from "./migrations/0004_queues.js"

/**
 * The `control` migration set (`0001_initial`, ledger id 2001; `0002_hosts`, 2002: the host presence
 * table of `HostPresence`; `0003_sequences`, 2003: on PostgreSQL one sequence per control number, so
 * writes of different runs share no counter row; `0004_queues`, 2004: queue, priority, availability, retry
 * policy and attempt per run, queue pause flags and limits, start idempotency keys), registered with the database ledger.
 *
 * @since 0.1.0
 * @category migrations
 */
export const set: DatabaseMigrations.MigrationSet = {
  namespace: "control",
  idOffset: 2000,
  migrations: { "0001_initial": initial, "0002_hosts": hosts, "0003_sequences": sequences, "0004_queues": queues }
}

/**
 * Ledger ids of this set's migrations that every read tolerates being pending: 2002 (`0002_hosts`) adds
 * only the host presence table, whose reader (`HostPresence.live`) answers `None` without it; 2003
 * (`0003_sequences`) adds only PostgreSQL sequences, and pages read without them as before (the writers
 * of such a database still number from the counter rows). A reader that refuses an older schema need
 * not refuse a database where only these are pending.
 *
 * @since 0.1.0
 * @category migrations
 */
export const optionalForReads: ReadonlyArray<number> = [2002, 2003]

/**
 * Run the ledger over this set alone; answers the migrations it applied (`[]` when none were pending).
 *
 * @since 0.1.0
 * @category migrations
 */
export const run: Effect.Effect<
  ReadonlyArray<DatabaseMigrations.AppliedMigration>,
  DatabaseMigrations.MigrationError | DatabaseError,
  SqlClient.SqlClient
> = DatabaseMigrations.run([set])

/**
 * A layer that applies this set before exposing the database.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never, DatabaseMigrations.MigrationError | DatabaseError, SqlClient.SqlClient> =
  DatabaseMigrations.layer([set])
