/**
 * A fresh PostgreSQL schema for worker processes to migrate; dropped by `dispose`.
 */
import { randomBytes } from "node:crypto"
import { loadPg } from "./drivers.js"

export const freshSchema = async (url: string) => {
  const pg = loadPg()
  const schema = `test_${randomBytes(16).toString("hex")}`
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query(`CREATE SCHEMA ${schema}`)
  await client.end()
  return {
    schema,
    args: ["pg", url, schema],
    dispose: async () => {
      const c = new pg.Client({ connectionString: url })
      await c.connect()
      await c.query(`DROP SCHEMA ${schema} CASCADE`)
      await c.end()
    }
  }
}
