/**
 * The SQL control stack the control benches build: a database → journal, run-store and control
 * migrations → one `SqlConsensus` shared by journal and run store → `SqlControlRuntime` over `flows`
 * → `Control`.
 */
import * as Control from "@baton/control/Control"
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import * as ControlMigrations from "@baton/control/Migrations"
import * as SqlControlRuntime from "@baton/control/SqlControlRuntime"
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as RunStoreMigrations from "@baton/run-store/Migrations"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Layer } from "effect"

/** The bench's one flow, `bench`: no approval, no capabilities, code version `d1`. */
export const benchFlow = (description: string): ControlRuntime.DurableFlow => ({
  flowId: "bench",
  description,
  deployClass: false,
  envelope: { capabilities: [], flows: [], budget: {} },
  executionDigest: "d1"
})

export const controlStack = <E>(
  flows: ReadonlyArray<ControlRuntime.DurableFlow>,
  database: Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, E>
) => {
  const migrated = Layer.provideMerge(
    Layer.orDie(DatabaseMigrations.layer([JournalMigrations.set, RunStoreMigrations.set, ControlMigrations.set])),
    Layer.orDie(database)
  )
  const stores = Layer.provideMerge(
    Layer.mergeAll(Layer.orDie(SqlJournal.layerWith()), RunStore.layerWith),
    Layer.provideMerge(SqlConsensus.layer, migrated)
  )
  const runtime = Layer.provideMerge(Layer.orDie(SqlControlRuntime.layer({ flows })), stores)
  return Layer.provideMerge(Control.layer, runtime)
}
