import * as TestDatabase from "@baton/database/TestDatabase"
import * as Migrations from "@baton/journal/Migrations"
import * as SqlConsensus from "@baton/journal/SqlConsensus"
import { describe } from "@effect/vitest"
import { Layer } from "effect"
import { consensusContract } from "./support/consensusContract.js"

const url = TestDatabase.postgresTestUrl("journal consensus")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  consensusContract(
    "SqlConsensus on PostgreSQL",
    () =>
      Layer.provideMerge(SqlConsensus.layer, Layer.provideMerge(Migrations.layer, TestDatabase.layerPostgres(url!))),
    { transactional: true, timeout: 30_000 }
  )
})
