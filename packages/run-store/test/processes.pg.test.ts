import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { freshSchema } from "./support/pgSchema.js"
import { processSuite } from "./suites/processes.js"

const url = TestDatabase.postgresTestUrl("run-store processes")

describe.skipIf(url === undefined)("separate processes on one PostgreSQL database", () => {
  describe.concurrent("races and takeovers", () => processSuite(() => freshSchema(url!), 500), { timeout: 600_000 })
})
