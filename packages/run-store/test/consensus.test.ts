import * as DatabaseMigrations from "@baton/database/Migrations"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as Migrations from "@baton/run-store/Migrations"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import { Layer } from "effect"
import { consensusContract } from "../../journal/test/support/consensusContract.js"
import { consensusAgreement } from "./suites/consensusAgreement.js"
import { contractRuns } from "./support/contractRuns.js"

consensusContract(
  "the run store's SqlConsensus on SQLite",
  () =>
    Layer.provideMerge(
      SqlConsensus.layer,
      Layer.provideMerge(DatabaseMigrations.layer([JournalMigrations.set, Migrations.set]), TestDatabase.layer)
    ),
  { transactional: true, prepare: contractRuns }
)

consensusAgreement("SQLite", () => TestDatabase.layer, 2000, { probe: 60_000, walk: 240_000 })
