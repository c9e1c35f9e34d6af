/**
 * The stack behind `ControlRuntime.layerMemory` (Node only): `SqlControlRuntime` over a fresh in-memory
 * SQLite database (`TestDatabase.layer`, the database of `TestJournal.layer` and `TestRunStore.layer`),
 * migrated with the journal's, the run store's and control's sets in one ledger pass, with one
 * `SqlConsensus` shared by the journal and the run store: composed as a host composes them.
 */
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as RunStoreMigrations from "@baton/run-store/Migrations"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import { Layer } from "effect"
import type { MemoryError, MemoryOptions, MemoryServices } from "../ControlRuntime.js"
import * as Migrations from "../Migrations.js"
import * as SqlControlRuntime from "../SqlControlRuntime.js"

/** The SQL runtime's options from a memory runtime's (the named fields only). */
const sqlOptions = (options: MemoryOptions): SqlControlRuntime.Options => ({
  flows: options.flows,
  now: options.now,
  principal: options.principal,
  approvalAuthority: options.approvalAuthority
})

/** The whole stack over a database of its own; each build is a fresh, empty database. */
export const layer = (options: MemoryOptions): Layer.Layer<MemoryServices, MemoryError> => {
  const migrated = Layer.provideMerge(
    DatabaseMigrations.layer([JournalMigrations.set, RunStoreMigrations.set, Migrations.set]),
    TestDatabase.layer
  )
  const consensus = Layer.provideMerge(SqlConsensus.layer, migrated)
  const stores = Layer.provideMerge(Layer.mergeAll(SqlJournal.layerWith(), RunStore.layerWith), consensus)
  return Layer.provideMerge(SqlControlRuntime.layer(sqlOptions(options)), stores)
}
