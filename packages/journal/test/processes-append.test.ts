import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { describe, expect, it } from "@effect/vitest"
import { lines } from "./support/lines.js"
import { fixture, migrate, query, tempFile, timeout, withStdin } from "./support/sqliteFiles.js"

describe("several OS processes on one SQLite file", () => {
  it("check 16: three processes appending to one run get exactly seqs 0..149", async () => {
    const filename = tempFile()
    await migrate(filename)
    const children = [0, 1, 2].map((n) => spawnFixture(fixture("append"), [filename, "r", `source-${n}`, "50"], withStdin))
    const finished = children.map(completion)
    const outputs = children.map(lines)
    await Promise.all(outputs.map((output) => output.event("ready")))
    for (const child of children) child.stdin!.write("go\n")
    const done = await Promise.all(outputs.map((output) => output.event("done")))
    const results = await Promise.all(finished)
    expect(results.map((result) => result.code)).toEqual([0, 0, 0])
    const reported = done.flatMap((value) => value["seqs"] as Array<number>).sort((a, b) => a - b)
    expect(reported).toEqual(Array.from({ length: 150 }, (_, i) => i))
    const stored = await query(filename, (sql) =>
      sql<{ seq: number; source_id: string; source_seq: number }>`SELECT seq, source_id, source_seq
        FROM flows_journal_events WHERE run_id = 'r' ORDER BY seq`)
    expect(stored.map((row) => row.seq)).toEqual(Array.from({ length: 150 }, (_, i) => i))
    for (const source of ["source-0", "source-1", "source-2"]) {
      expect(stored.filter((row) => row.source_id === source).map((row) => row.source_seq)).toEqual(
        Array.from({ length: 50 }, (_, i) => i)
      )
    }
  }, timeout)
})
