/**
 * Colour only on a terminal without NO_COLOR: the real `baton` bin with its output piped writes no ANSI
 * escape sequences, neither in help nor in usage errors.
 */
import { describe, expect, it } from "@effect/vitest"
import { fileURLToPath } from "node:url"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { colourAllowed, plainConsole, stripAnsi } from "../src/internal/cliColour.js"

const bin = fileURLToPath(new URL("../src/bin.ts", import.meta.url))

describe("cli colour", () => {
  it("--help and a usage error write no ANSI escapes when stdout and stderr are pipes", async () => {
    const help = await completion(spawnFixture(bin, ["--help"]))
    expect(help.code).toBe(0)
    expect(help.stdout).toContain("USAGE")
    expect(help.stdout).not.toContain("\x1b[")
    const verbHelp = await completion(spawnFixture(bin, ["journal", "--help"]))
    expect(verbHelp.code).toBe(0)
    expect(verbHelp.stdout).toContain("--follow")
    expect(verbHelp.stdout).not.toContain("\x1b[")
    const usage = await completion(spawnFixture(bin, ["runz"]))
    expect(usage.code).toBe(2)
    expect(usage.stdout + usage.stderr).toContain("runs")
    expect(usage.stdout + usage.stderr).not.toContain("\x1b[")
  }, 60_000)

  it("the console keeps escapes for a terminal and drops them for a pipe or NO_COLOR", () => {
    const seen: Array<string> = []
    const record = (...args: ReadonlyArray<unknown>) => {
      seen.push(args.map(String).join(" "))
      return undefined as never
    }
    const base = { log: record, error: record, info: record, warn: record, debug: record } as never
    const styled = "\x1b[0;1mUSAGE\x1b[0m"
    plainConsole(base, { stdout: true, stderr: false }).log(styled)
    plainConsole(base, { stdout: true, stderr: false }).error(styled)
    plainConsole(base, { stdout: false, stderr: true }).log(styled)
    expect(seen).toEqual([styled, "USAGE", "USAGE"])
    expect(colourAllowed({ isTTY: true }, {})).toBe(true)
    expect(colourAllowed({ isTTY: true }, { NO_COLOR: "1" })).toBe(false)
    expect(colourAllowed({ isTTY: false }, {})).toBe(false)
    expect(colourAllowed({}, {})).toBe(false)
    expect(stripAnsi("\x1b]8;;https://x\x07link\x1b]8;;\x07 \x1b[31mred\x1b[0m")).toBe("link red")
  })
})
