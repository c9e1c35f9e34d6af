import { describe } from "@effect/vitest"
import * as TestDatabase from "@baton/database/TestDatabase"
import { migrationSuite } from "./suites/migrationSuite.js"

describe("Migrations on SQLite (TestDatabase)", () => {
  migrationSuite(() => TestDatabase.layer)
})
