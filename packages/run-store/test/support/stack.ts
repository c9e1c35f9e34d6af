/**
 * Test stacks: the production stores (and a journal sharing one strategy)
 * over a migrated SQLite or PostgreSQL database, plus the spec's owners.
 */
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as Companion from "@baton/journal/Companion"
import * as Consensus from "@baton/journal/Consensus"
import type * as Journal from "@baton/journal/Journal"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as Migrations from "@baton/run-store/Migrations"
import * as RunStore from "@baton/run-store/RunStore"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"

export const A = Object.freeze({ hostId: "host-a", pid: 101, nonce: "a" })
export const B = Object.freeze({ hostId: "host-a", pid: 202, nonce: "b" })
export const C = Object.freeze({ hostId: "host-b", pid: 303, nonce: "c" })

type Owner = { readonly hostId: string; readonly pid: number; readonly nonce: string }

/** Evidence naming `o` at `t`: same-host-pid-dead for a same-host claimant, else cross-host-unreachable-stale. */
export const ev = (o: Owner, c: Owner, t: number): Consensus.LivenessEvidence => ({
  expectedOwner: o,
  checkedAtMs: t,
  kind: o.hostId === c.hostId ? "same-host-pid-dead" : "cross-host-unreachable-stale"
})

export const pending: RunStore.RunSnapshot = Object.freeze({ status: "pending", owner: null, heartbeatAtMs: null })
export const running = (owner: Owner, heartbeatAtMs: number): RunStore.RunSnapshot => ({
  status: "running",
  owner,
  heartbeatAtMs
})

/** Creates `id` with `stateJson` and makes `owner` its owner at 0 (dies unless `Activated`); yields the store. */
export const ownedRun = (id: string, owner: Owner = A, stateJson = "{}") =>
  Effect.gen(function*() {
    const store = yield* RunStore.RunStore
    yield* store.create(id, stateJson)
    const outcome = yield* store.claimAndOwn(id, pending, owner, 0)
    if (outcome._tag !== "Activated") return yield* Effect.dieMessage(`ownedRun: claimAndOwn answered ${outcome._tag}`)
    return store
  })

export type Env =
  | RunStore.RunStore
  | AttemptStore.AttemptStore
  | Journal.Journal
  | Consensus.Consensus
  | SqlClient.SqlClient
  | DurableWriter.DurableWriter

export type Database = Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, unknown>

/** A migrated database. */
export const migrated = (db: Database) =>
  Layer.provideMerge(DatabaseMigrations.layer([JournalMigrations.set, Migrations.set]), db)

/** Stores + journal over one strategy build (default `SqlConsensus`). */
export const stack = (
  db: Database,
  consensus: Layer.Layer<Consensus.Consensus, never, SqlClient.SqlClient | DurableWriter.DurableWriter> =
    SqlConsensus.layer
): Layer.Layer<Env, unknown> =>
  Layer.provideMerge(
    Layer.mergeAll(RunStore.layerWith, SqlJournal.layerWith(), AttemptStore.layer),
    Layer.provideMerge(consensus, migrated(db))
  )

/** A stack factory: a fresh database per call. */
export type MakeStack = (consensus?: Layer.Layer<Consensus.Consensus, never, SqlClient.SqlClient | DurableWriter.DurableWriter>) => Layer.Layer<Env, unknown>

export const sqliteStack: MakeStack = (consensus) => stack(TestDatabase.layer, consensus)
export const postgresStack = (url: string): MakeStack => (consensus) =>
  stack(TestDatabase.layerPostgres(url), consensus)

/** The ownership facts of run `runId`, as transition names. */
export const facts = (runId: string) =>
  Effect.map(Companion.entries("run-store", runId, { limit: 1000 }), (page) =>
    page.entries.map((e) => e.eventType.replace("flows.consensus.", "")))

/** The raw ownership entries of run `runId`. */
export const factEntries = (runId: string) =>
  Effect.map(Companion.entries("run-store", runId, { limit: 1000 }), (page) => page.entries)

export const store = RunStore.RunStore
