/**
 * `pnpm start` refuses bad options as usage (exit 2, one line naming the option) before it creates
 * anything (node.md 7.1): `--batch-bytes` outside 1 MiB..1 GiB, an option where `--pattern`, `--resume`
 * or `--db` expects its value, an empty `--resume`, and `--crash-demo` with a single worker.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { tempDir } from "./cli-support.js"
import * as Support from "./example-support.js"

const startScript = fileURLToPath(new URL("../../../scripts/start.ts", import.meta.url))

/** Runs start; a regression that swallows an option must not leave it waiting for approval forever. */
const start = async (args: ReadonlyArray<string>) => {
  const child = spawnFixture(startScript, ["--", ...args])
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
  try {
    return await completion(child)
  } finally {
    clearTimeout(timer)
  }
}

describe("pnpm start option refusals", () => {
  const root = Support.makeTree(3)

  const refused = async (args: ReadonlyArray<string>, message: RegExp) => {
    const dir = tempDir()
    const db = path.join(dir, "x.db")
    const result = await start([root, ...args, "--db", db])
    expect(result.code, result.stdout + result.stderr).toBe(2)
    expect(result.stderr).toMatch(message)
    expect(result.stderr.trim().split("\n")).toHaveLength(1)
    expect(result.stdout).toBe("")
    // Nothing created: no database file, no journal side files.
    expect(fs.readdirSync(dir)).toEqual([])
  }

  it("--batch-bytes 0 and 1KiB are usage naming the option and its range; --help states the range", async () => {
    await refused(["--batch-bytes", "0", "--yes"], /^start: --batch-bytes expects a size between 1 MiB and 1 GiB, got "0"$/m)
    await refused(["--batch-bytes", "1KiB", "--yes"], /^start: --batch-bytes expects a size between 1 MiB and 1 GiB, got "1KiB"$/m)
    await refused(["--batch-bytes", "2GiB", "--yes"], /--batch-bytes expects a size between 1 MiB and 1 GiB, got "2GiB"/)
    const help = await start(["--help"])
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/--batch-bytes <size>.*1MiB\.\.1GiB/)
  }, 120_000)

  it("an option where --pattern, --resume or --db expects a value is usage naming the option", async () => {
    await refused(["--pattern", "--yes"], /^start: --pattern needs a value; got the option --yes/m)
    await refused(["--yes", "--resume", "--json"], /^start: --resume needs a value; got the option --json/m)
    await refused(["--resume", ""], /^start: --resume expects a run id such as run-1, got ""$/m)
    await refused(["--pattern", ""], /^start: --pattern expects a glob/m)
    const dir = tempDir()
    const result = await start([root, "--yes", "--db", "--json"])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/^start: --db needs a value; got the option --json/m)
    expect(fs.readdirSync(dir)).toEqual([])
  }, 120_000)

  it("--crash-demo --workers 1 is usage: nobody would be left to take over", async () => {
    await refused(["--crash-demo", "--workers", "1", "--yes"], /^start: --crash-demo needs --workers 2 or more \(got 1\)/m)
  }, 60_000)
})
