/**
 * Test layers (Node only): the production `SqlJournal.layerWith` over a
 * migrated database, fenced through `Consensus.layerLocal` (one lease map per
 * layer build, so two builds over one file do not share leases). Tests drive
 * fences through the exposed `Consensus`.
 *
 * @since 0.1.0
 */
import type { DatabaseError, DurableWriter } from "@baton/database/DurableWriter"
import type { MigrationError } from "@baton/database/Migrations"
import * as TestDatabase from "@baton/database/TestDatabase"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Layer } from "effect"
import * as Consensus from "./Consensus.js"
import type { Journal, JournalError } from "./Journal.js"
import * as Migrations from "./Migrations.js"
import * as SqlJournal from "./SqlJournal.js"

/**
 * The journal stack over any database layer (e.g. `TestDatabase.layerPostgres(url)`
 * or `SqliteDatabase.layer({ filename })`): migrated, with `Consensus.layerLocal`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerOn = <E>(
  database: Layer.Layer<SqlClient.SqlClient | DurableWriter, E>,
  options: SqlJournal.SqlJournalOptions = {}
): Layer.Layer<
  Journal | Consensus.Consensus | DurableWriter | SqlClient.SqlClient,
  E | JournalError | MigrationError | DatabaseError
> => {
  const migrated = Layer.provideMerge(Migrations.layer, database)
  const consensus = Layer.merge(Consensus.layerLocal, migrated)
  return Layer.provideMerge(SqlJournal.layerWith(options), consensus)
}

/**
 * The journal stack over a fresh in-memory SQLite database (`TestDatabase.layer`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: SqlJournal.SqlJournalOptions = {}
): Layer.Layer<
  Journal | Consensus.Consensus | DurableWriter | SqlClient.SqlClient,
  JournalError | MigrationError | DatabaseError
> => layerOn(TestDatabase.layer, options)
