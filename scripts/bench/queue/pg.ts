/** The parent's own PostgreSQL access: one pooled node-postgres client for schemas and counts. */
import pg from "pg"

let pool: pg.Pool | undefined

/** The bench's pool (2 connections) on `url`, made on first use. */
export const poolFor = (url: string): pg.Pool => {
  pool ??= new pg.Pool({ connectionString: url, max: 2 })
  return pool
}

/** One number from a `SELECT count(*) …` (or any single-value query). */
export const scalar = async (url: string, text: string, values: ReadonlyArray<unknown> = []): Promise<number> => {
  const result = await poolFor(url).query(text, [...values])
  return Number(Object.values(result.rows[0] ?? {})[0] ?? 0)
}

/** Drop a schema and everything in it. */
export const dropSchema = async (url: string, schema: string): Promise<void> => {
  await poolFor(url).query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
}

export const closePool = async (): Promise<void> => {
  const current = pool
  pool = undefined
  await current?.end()
}
