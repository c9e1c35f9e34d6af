import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { describe, expect, it } from "@effect/vitest"
import { lines } from "./support/lines.js"
import { fixture, migrate, query, tempFile, timeout, withStdin } from "./support/sqliteFiles.js"

describe("several OS processes on one SQLite file", () => {
  it("check 30: two processes racing 200 claims: exactly one Granted per run, never an error", async () => {
    const filename = tempFile()
    await migrate(filename)
    const children = ["proc-1", "proc-2"].map((host) => spawnFixture(fixture("claims"), [filename, host, "200"], withStdin))
    const finished = children.map(completion)
    const outputs = children.map(lines)
    await Promise.all(outputs.map((output) => output.event("ready")))
    for (const child of children) child.stdin!.write("go\n")
    const [first, second] = (await Promise.all(outputs.map((output) => output.event("done")))).map(
      (value) => value["results"] as Array<string>
    )
    expect((await Promise.all(finished)).map((result) => result.code)).toEqual([0, 0])
    const leases = await query(filename, (sql) =>
      sql<{ run_id: string; claim_host_id: string }>`SELECT run_id, claim_host_id FROM flows_consensus_leases`)
    const winners = new Map(leases.map((row) => [row.run_id, row.claim_host_id]))
    let firstWins = 0
    for (let i = 0; i < 200; i++) {
      const pair = [first![i], second![i]].sort()
      expect(pair, `run-${i}`).toEqual(["Granted", "Rejected:already_claimed"])
      const winner = first![i] === "Granted" ? "proc-1" : "proc-2"
      if (winner === "proc-1") firstWins++
      expect(winners.get(`run-${i}`)).toBe(winner)
    }
    expect(leases.length).toBe(200)
    expect(firstWins).toBeGreaterThanOrEqual(0)
  }, timeout)
})
