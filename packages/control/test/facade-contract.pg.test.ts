import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { facadeContract } from "./fixtures/facadeContract.js"
import { flows } from "./fixtures/facadeFlows.js"
import { sqlControl } from "./fixtures/facadeLayers.js"
import { sharedPostgres } from "./fixtures/facadePostgres.js"

const url = TestDatabase.postgresTestUrl("control facade contract")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  const database = sharedPostgres(url!)
  facadeContract("SqlControlRuntime on PostgreSQL", () => sqlControl(database(), { flows }))
})
