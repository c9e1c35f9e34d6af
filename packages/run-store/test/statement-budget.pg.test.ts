import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, expect, it } from "vitest"
import { countLifecycle } from "./support/budget.js"
import { freshSchema } from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("run-store statement budget")

describe.skipIf(url === undefined)("statement budget (PostgreSQL)", () => {
  it("each ownership move of a lifecycle is one statement in one round trip, its facts included", async () => {
    const fresh = await freshSchema(url!)
    try {
      const counts = await countLifecycle(fresh.args)
      for (const op of ["create", "claimAndOwn", "heartbeat", "transitionOwned"] as const) {
        expect(counts[op], op).toEqual({ statements: 1, transactions: 0, roundTrips: 1 })
      }
    } finally {
      await fresh.dispose()
    }
  }, 60_000)
})
