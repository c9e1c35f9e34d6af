/**
 * The run store's migration set: namespace `run-store`, id block 1000
 * (ledger ids 1001–1999): `0001_initial`, `0002_lineage`,
 * `0003_execution_revisions`, `0004_waiting_request`, `0005_row_leases`, `0006_commit_feeds`,
 * `0007_drop_consensus_leases` (drops the journal's unused `flows_consensus_leases` after
 * moving any generation still recorded only there onto the run row). Append-only.
 *
 * @since 0.1.0
 */
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as DatabaseMigrations from "@baton/database/Migrations"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Effect, Layer } from "effect"
import { initial } from "./migrations/0001_initial.js"
import { lineage } from "./migrations/0002_lineage.js"
import { executionRevisions } from "./migrations/0003_execution_revisions.js"
import { waitingRequest } from "./migrations/0004_waiting_request.js"
import { rowLeases } from "./migrations/0005_row_leases.js"
import { commitFeeds } from "./migrations/0006_commit_feeds.js"
import { dropConsensusLeases } from "./migrations/0007_drop_consensus_leases.js"

/**
 * The set to compose with the journal's in one ledger pass (the journal's set
 * goes first: a run's ownership facts live on its companion stream).
 *
 * @since 0.1.0
 * @category migrations
 */
export const set: DatabaseMigrations.MigrationSet = Object.freeze({
  namespace: "run-store",
  idOffset: 1000,
  migrations: Object.freeze({
    "0001_initial": initial,
    "0002_lineage": lineage,
    "0003_execution_revisions": executionRevisions,
    "0004_waiting_request": waitingRequest,
    "0005_row_leases": rowLeases,
    "0006_commit_feeds": commitFeeds,
    "0007_drop_consensus_leases": dropConsensusLeases
  })
})

/**
 * Applies this set alone; returns the migrations applied now (`[]` when none was pending).
 *
 * @since 0.1.0
 * @category migrations
 */
export const run: Effect.Effect<
  ReadonlyArray<DatabaseMigrations.AppliedMigration>,
  DatabaseMigrations.MigrationError | DurableWriter.DatabaseError,
  SqlClient.SqlClient
> = DatabaseMigrations.run([set])

/**
 * `DatabaseMigrations.layer([set])`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never, DatabaseMigrations.MigrationError | DurableWriter.DatabaseError, SqlClient.SqlClient> =
  DatabaseMigrations.layer([set])
