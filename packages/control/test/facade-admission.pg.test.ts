import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { facadeAdmission } from "./fixtures/facadeAdmission.js"
import { flows } from "./fixtures/facadeFlows.js"
import { sqlControl } from "./fixtures/facadeLayers.js"
import { sharedPostgres } from "./fixtures/facadePostgres.js"

const url = TestDatabase.postgresTestUrl("control facade admission")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  const database = sharedPostgres(url!)
  facadeAdmission("SqlControlRuntime on PostgreSQL", () => sqlControl(database(), { flows }))
})
