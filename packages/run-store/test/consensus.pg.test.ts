import * as DatabaseMigrations from "@baton/database/Migrations"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as Migrations from "@baton/run-store/Migrations"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import { describe } from "@effect/vitest"
import { Layer } from "effect"
import { consensusContract } from "../../journal/test/support/consensusContract.js"
import { consensusAgreement } from "./suites/consensusAgreement.js"
import { contractRuns } from "./support/contractRuns.js"

const url = TestDatabase.postgresTestUrl("the run store's SqlConsensus on PostgreSQL")

describe.skipIf(url === undefined)("the run store's SqlConsensus on PostgreSQL", () => {
  consensusContract(
    "the run store's SqlConsensus on PostgreSQL",
    () =>
      Layer.provideMerge(
        SqlConsensus.layer,
        Layer.provideMerge(DatabaseMigrations.layer([JournalMigrations.set, Migrations.set]), TestDatabase.layerPostgres(url!))
      ),
    { transactional: true, prepare: contractRuns, timeout: 60_000 }
  )
  consensusAgreement("PostgreSQL", () => TestDatabase.layerPostgres(url!), 2000, { probe: 60_000, walk: 240_000 })
})
