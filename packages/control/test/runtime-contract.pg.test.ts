import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, layer } from "@effect/vitest"
import { runtimeContract } from "./fixtures/runtimeContract.js"
import { pgShared, resetRuntime } from "./fixtures/runtimeSupport.js"

const url = TestDatabase.postgresTestUrl("control runtime contract")

// One schema for the suite; every test starts from emptied tables and a fresh runtime.
describe.skipIf(url === undefined)("PostgreSQL", () => {
  layer(pgShared(url!), { timeout: 120_000 })((it) => {
    runtimeContract("postgres", resetRuntime(), it)
  })
})
