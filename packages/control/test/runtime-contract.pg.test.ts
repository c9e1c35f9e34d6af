import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { runtimeContract } from "./fixtures/runtimeContract.js"
import { pgDatabase, sqlRuntime } from "./fixtures/runtimeSupport.js"

const url = TestDatabase.postgresTestUrl("control runtime contract")

describe.skipIf(url === undefined)("PostgreSQL", () => {
  runtimeContract("postgres", () => sqlRuntime(pgDatabase(url!)))
})
