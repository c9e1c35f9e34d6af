import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { lifecycleSuite } from "./fixtures/facadeLifecycle.js"

const url = TestDatabase.postgresTestUrl("control facade lifecycle")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  lifecycleSuite("PostgreSQL", () => TestDatabase.layerPostgres(url!))
})
