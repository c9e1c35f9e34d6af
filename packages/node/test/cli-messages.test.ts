/**
 * CLI wording: a second decision on a resolved plan (with or without a reason) is "already resolved", not a
 * key conflict; `--lock-wait` says which forms it accepts; a missing-set ledger is named as such.
 */
import { describe, expect, it } from "@effect/vitest"
import * as path from "node:path"
import { baton, exampleDatabase, snapshot, tempDir } from "./cli-support.js"

describe("approve/deny default keys", () => {
  it("approve with a reason, then approve without one: already resolved (4), not a key conflict; a repeat replays", async () => {
    const { cli, root } = await exampleDatabase()
    expect((await cli("plan", "index-dir", "--input", JSON.stringify({ root }))).code).toBe(0)
    const first = await cli("approve", "plan-1", "--reason", "x")
    expect(first.code, first.stderr).toBe(0)
    const repeat = await cli("approve", "plan-1", "--reason", "x")
    expect(repeat.code, repeat.stderr).toBe(0)
    expect(repeat.stdout).toContain("plan-1: already approved")
    for (const args of [["approve", "plan-1"], ["approve", "plan-1", "--reason", "other"], ["deny", "plan-1"]]) {
      const again = await cli(...args)
      expect(again.code, args.join(" ")).toBe(4)
      expect(again.stderr, args.join(" ")).toContain("approval plan-1 was already resolved")
      expect(again.stderr).not.toContain("idempotency key")
    }
  }, 60_000)
})

describe("--lock-wait", () => {
  it("a bare number is refused naming the unit forms; the help text lists them", async () => {
    const dir = tempDir()
    const refused = await baton("runs", "--lock-wait", "1", "--db", path.join(dir, "missing.db"))
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain("--lock-wait expects a number with a unit (ms, s, m, h, d)")
    expect(refused.stderr).toContain("(a bare number has no unit: 1s or 1ms)")
    expect(snapshot(dir)).toEqual({})
    const help = await baton("runs", "--help")
    expect(help.stdout.replace(/\s+/g, " ")).toContain("how long writes retry a held lock: a number with a unit, e.g. 500ms, 90s, 15m, 2h, 3d (default 5s)")
  })
})
