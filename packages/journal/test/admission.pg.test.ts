import * as TestDatabase from "@baton/database/TestDatabase"
import * as TestJournal from "@baton/journal/TestJournal"
import { describe } from "@effect/vitest"
import { admissionContract } from "./support/admissionContract.js"

const url = TestDatabase.postgresTestUrl("journal admission")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  admissionContract("PostgreSQL", (options) => TestJournal.layerOn(TestDatabase.layerPostgres(url!), options), 30_000)
})
