/**
 * A run's budget of writes: a 3-step workflow its host starts and awaits costs at most 2 + 2·3 write
 * transactions (start with its claim, each step's start and completion with their journal entries,
 * the settle carrying the drive's opening entry), counted at the driver in a process of its own.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, expect, it } from "@effect/vitest"
import * as crypto from "node:crypto"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import * as PgSchema from "./support/pgSchema.js"

const counter = new URL("../../../scripts/lib/count-workflow.ts", import.meta.url)

interface Counts {
  readonly statements: number
  readonly writeTransactions: number
  readonly roundTrips: number
}

const count = async (args: ReadonlyArray<string>): Promise<Counts> => {
  const done = await completion(spawnFixture(counter, ["--runs", "5", ...args], {
    env: { PGOPTIONS: "--client-min-messages=warning" }
  }))
  const line = done.stdout.split("\n").find((l) => l.startsWith("{"))
  if (done.code !== 0 || line === undefined) throw new Error(`count-workflow failed (${done.code}): ${done.stderr.slice(-2000)}`)
  return JSON.parse(line)
}

const url = TestDatabase.postgresTestUrl("write budget on PostgreSQL")

describe("a run's budget of writes", () => {
  it("a 3-step workflow costs at most 8 write transactions on a SQLite file", async () => {
    const counts = await count([])
    expect(counts.writeTransactions).toBeLessThanOrEqual(2 + 2 * 3)
    // Each step writes: fewer than 6 would mean a step's start or completion was not written.
    expect(counts.writeTransactions).toBeGreaterThanOrEqual(2 + 3)
  }, 120_000)

  it.skipIf(url === undefined)("a 3-step workflow costs at most 8 write transactions on PostgreSQL", async () => {
    const schema = `node_budget_${crypto.randomBytes(8).toString("hex")}`
    try {
      const counts = await count(["--pg", url!, "--schema", schema])
      expect(counts.writeTransactions).toBeLessThanOrEqual(2 + 2 * 3)
      expect(counts.writeTransactions).toBeGreaterThanOrEqual(2 + 3)
      expect(counts.roundTrips).toBeGreaterThan(0)
    } finally {
      await PgSchema.dropSchema(url!, schema)
    }
  }, 120_000)
})
