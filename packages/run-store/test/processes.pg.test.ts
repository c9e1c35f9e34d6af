import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { freshSchema } from "./support/pgSchema.js"
import { processSuite } from "./suites/processes.js"

const url = TestDatabase.postgresTestUrl("run-store processes")

describe.concurrent.skipIf(url === undefined)("separate processes on one PostgreSQL database", () =>
  processSuite(() => freshSchema(url!), 500), { timeout: 240_000 })
