import * as TestDatabase from "@baton/database/TestDatabase"
import * as TestJournal from "@baton/journal/TestJournal"
import { describe } from "@effect/vitest"
import { journalContract } from "./support/journalContract.js"

const url = TestDatabase.postgresTestUrl("journal contract")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  journalContract("PostgreSQL", (options) => TestJournal.layerOn(TestDatabase.layerPostgres(url!), options), {
    timeout: 30_000
  })
})
