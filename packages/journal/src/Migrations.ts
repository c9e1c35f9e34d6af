/**
 * The journal's migration set: namespace `journal`, id block 0 (ledger ids
 * 1–999): `0001_journal` (events, heads, checkpoints, dedup),
 * `0002_consensus`. The latter still creates `flows_consensus_leases`, the
 * lease table of a SQL strategy the journal no longer ships: nothing reads or
 * writes it, and the run store's `0007_drop_consensus_leases` moves what is
 * left of it onto the run rows and drops it. It stays in the set unchanged
 * because migrations are append-only: databases have it in their ledger, and
 * replaying the set from any point rebuilds the schema those databases had.
 * `0003_append_function` (PostgreSQL: `flows_journal_append`) is the append a
 * run-store move runs inside its own statement; `0004_append_floor` adds its
 * overload with a producer floor, the second half of a fenced append's one
 * statement.
 *
 * @since 0.1.0
 */
import * as DatabaseMigrations from "@baton/database/Migrations"
import type { DatabaseError } from "@baton/database/DurableWriter"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Effect, Layer } from "effect"
import journal from "./migrations/0001_journal.js"
import consensus from "./migrations/0002_consensus.js"
import appendFunction from "./migrations/0003_append_function.js"
import appendFloor from "./migrations/0004_append_floor.js"

/**
 * Install alongside the other packages' sets (`DatabaseMigrations.run([...sets])`).
 *
 * @since 0.1.0
 * @category migrations
 */
export const set: DatabaseMigrations.MigrationSet = {
  namespace: "journal",
  idOffset: 0,
  migrations: {
    "0001_journal": journal,
    "0002_consensus": consensus,
    "0003_append_function": appendFunction,
    "0004_append_floor": appendFloor
  }
}

/**
 * Apply this set alone; returns the migrations applied now.
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
 * `DatabaseMigrations.layer([set])`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never, DatabaseMigrations.MigrationError | DatabaseError, SqlClient.SqlClient> =
  DatabaseMigrations.layer([set])
