import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { facadeContract } from "./fixtures/facadeContract.js"
import { flows } from "./fixtures/facadeFlows.js"
import { sqlControl } from "./fixtures/facadeLayers.js"

const url = TestDatabase.postgresTestUrl("control facade contract")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  facadeContract("SqlControlRuntime on PostgreSQL", () => sqlControl(TestDatabase.layerPostgres(url!), { flows }))
})
