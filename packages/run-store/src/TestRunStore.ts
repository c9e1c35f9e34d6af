/**
 * Test layers (Node only): the production `RunStore.layer` and
 * `AttemptStore.layer` over a fresh in-memory SQLite database, migrated with
 * the journal's set and this package's set in one ledger pass; leases live on
 * the run rows (`SqlConsensus`). No `Journal` is provided, so no ownership facts are
 * recorded. The database closes with the layer's scope; drive time with
 * `TestClock`.
 *
 * @since 0.1.0
 */
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as JournalMigrations from "@baton/journal/Migrations"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Layer } from "effect"
import * as AttemptStore from "./AttemptStore.js"
import * as Migrations from "./Migrations.js"
import * as RunStore from "./RunStore.js"

/**
 * Stores plus the migrated database's client and writer (for raw-SQL tests).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithDatabase: Layer.Layer<
  RunStore.RunStore | AttemptStore.AttemptStore | SqlClient.SqlClient | DurableWriter.DurableWriter,
  DatabaseMigrations.MigrationError | DurableWriter.DatabaseError
> = Layer.provideMerge(
  Layer.merge(RunStore.layer, AttemptStore.layer),
  Layer.provideMerge(DatabaseMigrations.layer([JournalMigrations.set, Migrations.set]), TestDatabase.layer)
)

/**
 * The two stores over a fresh migrated in-memory database.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<
  RunStore.RunStore | AttemptStore.AttemptStore,
  DatabaseMigrations.MigrationError | DurableWriter.DatabaseError
> = layerWithDatabase
