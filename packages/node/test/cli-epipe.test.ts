/**
 * A closed stdout (`baton journal run-1 | head -1`) ends the real CLI quietly: exit 0, no EPIPE trace.
 */
import { describe, expect, it } from "@effect/vitest"
import { fileURLToPath } from "node:url"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { configModule, exampleDatabase } from "./cli-support.js"

const bin = fileURLToPath(new URL("../src/bin.ts", import.meta.url))

describe("cli on a closed stdout", () => {
  it("journal and runs into a reader that went away exit 0 without a stack trace", async () => {
    const { cli, db, root } = await exampleDatabase()
    expect((await cli("plan", "index-dir", "--input", JSON.stringify({ root }))).code).toBe(0)
    expect((await cli("approve", "plan-1")).code).toBe(0)
    const runId = (await cli("launch", "plan-1")).stdout.split("\n")[0]!
    for (const args of [["journal", runId], ["runs"], ["run", runId, "--json"]]) {
      const child = spawnFixture(bin, [...args, "--db", db, "--config", configModule])
      // The reader is gone before the CLI prints anything: its first write meets EPIPE.
      child.stdout!.destroy()
      const result = await completion(child)
      expect(result.stderr, args.join(" ")).toBe("")
      expect(result.code, args.join(" ")).toBe(0)
    }
  }, 60_000)
})
