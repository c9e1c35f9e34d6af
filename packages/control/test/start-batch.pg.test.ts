import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { sharedPostgres } from "./fixtures/facadePostgres.js"
import { startBatchSuite } from "./fixtures/startBatch.js"

const url = TestDatabase.postgresTestUrl("control startMany batches")

describe.skipIf(url === undefined)("startMany batches on PostgreSQL", () => {
  startBatchSuite("PostgreSQL", sharedPostgres(url!))
})
