import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { lifecycleSuite } from "./fixtures/facadeLifecycle.js"
import { sharedPostgres } from "./fixtures/facadePostgres.js"

const url = TestDatabase.postgresTestUrl("control facade lifecycle")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  lifecycleSuite("PostgreSQL", sharedPostgres(url!))
})
