import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { countLifecycle } from "./support/budget.js"

describe("statement budget (SQLite)", () => {
  it("each ownership move of a lifecycle is one transaction, its facts two statements however many", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-budget-"))
    try {
      const counts = await countLifecycle(["sqlite", path.join(dir, "budget.db")])
      for (const op of ["create", "claimAndOwn", "heartbeat", "transitionOwned"] as const) {
        expect(counts[op].transactions, op).toBe(1)
      }
      // BEGIN, the move's update, the facts' INSERT … SELECT and head, COMMIT.
      expect(counts.claimAndOwn.statements).toBe(5)
      expect(counts.transitionOwned.statements).toBe(5)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
