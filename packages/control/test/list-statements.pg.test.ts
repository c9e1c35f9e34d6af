import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { sharedPostgres } from "./fixtures/facadePostgres.js"
import { listStatementsSuite } from "./fixtures/listStatements.js"

const url = TestDatabase.postgresTestUrl("control list statements")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  listStatementsSuite("PostgreSQL", sharedPostgres(url!))
})
