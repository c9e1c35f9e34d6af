import { describe } from "@effect/vitest"
import * as TestDatabase from "@baton/database/TestDatabase"
import { dialectSuite } from "./suites/dialectSuite.js"
import { migrationSuite } from "./suites/migrationSuite.js"
import { writerSuite } from "./suites/writerSuite.js"

const url = TestDatabase.postgresTestUrl("database: DurableWriter, Dialect and Migrations on PostgreSQL")

describe.skipIf(url === undefined)("on PostgreSQL (TestDatabase.layerPostgres)", () => {
  describe("DurableWriter", () => writerSuite(() => TestDatabase.layerPostgres(url!), { keysAreIgnored: false }))
  describe("Dialect", () => dialectSuite(() => TestDatabase.layerPostgres(url!), { postgres: true }))
  describe("Migrations", () => migrationSuite(() => TestDatabase.layerPostgres(url!)))
})
