import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { integrityContract } from "./support/integrityContract.js"

const url = TestDatabase.postgresTestUrl("journal integrity")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  integrityContract("PostgreSQL", () => TestDatabase.layerPostgres(url!), 30_000)
})
