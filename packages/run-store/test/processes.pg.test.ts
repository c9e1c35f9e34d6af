import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { loadPg } from "./support/drivers.js"
import { processSuite } from "./suites/processes.js"

const url = TestDatabase.postgresTestUrl("run-store processes")

/** A fresh schema the workers migrate; dropped afterwards. */
const pgSchema = async () => {
  const pg = loadPg()
  const schema = `test_${randomBytes(16).toString("hex")}`
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query(`CREATE SCHEMA ${schema}`)
  await client.end()
  return {
    args: ["pg", url!, schema],
    dispose: async () => {
      const c = new pg.Client({ connectionString: url })
      await c.connect()
      await c.query(`DROP SCHEMA ${schema} CASCADE`)
      await c.end()
    }
  }
}

describe.skipIf(url === undefined)("separate processes on one PostgreSQL database", () =>
  processSuite(pgSchema, 500), { timeout: 240_000 })
