import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { describe, expect, it } from "@effect/vitest"
import { lines } from "./support/lines.js"
import { fixture, migrate, query, tempFile, timeout } from "./support/sqliteFiles.js"

describe("several OS processes on one SQLite file", () => {
  it("check 31: no zombie append across processes: the owner's accepted entries precede the thief's marker", async () => {
    const filename = tempFile()
    await migrate(filename)
    const owner = spawnFixture(fixture("zombie"), [filename, "owner"])
    const ownerFinished = completion(owner)
    const ownerLines = lines(owner)
    await ownerLines.until((value) => value["event"] === "accepted" && (value["seq"] as number) >= 20)
    const thief = spawnFixture(fixture("zombie"), [filename, "thief"])
    const thiefFinished = completion(thief)
    const marker = (await lines(thief).event("marker"))["seq"] as number
    const done = await ownerLines.event("done")
    expect((await Promise.all([ownerFinished, thiefFinished])).map((result) => result.code)).toEqual([0, 0])
    const accepted = ownerLines.seen.filter((value) => value["event"] === "accepted").map((value) => value["seq"] as number)
    expect(accepted.length).toBeGreaterThanOrEqual(21)
    expect(Math.max(...accepted)).toBeLessThan(marker)
    expect((await ownerLines.event("fenced"))["code"]).toBe("fence_lost")
    expect(done["after"]).toEqual(["fence_lost", "fence_lost", "fence_lost"])
    const stored = await query(filename, (sql) =>
      sql<{ seq: number; source_id: string }>`SELECT seq, source_id FROM flows_journal_events WHERE run_id = 'r' ORDER BY seq`)
    expect(stored.map((row) => row.seq)).toEqual(Array.from({ length: stored.length }, (_, i) => i))
    expect(stored.filter((row) => row.source_id === "owner").length).toBe(accepted.length)
    expect(stored[stored.length - 1]).toEqual({ seq: marker, source_id: "thief" })
  }, timeout)
})
