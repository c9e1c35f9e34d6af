/**
 * `baton --version` is the package's version, and the `journal` synopsis shows `--type` as optional.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import { baton } from "./cli-support.js"

const pkg = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }

describe("cli version and synopsis", () => {
  it("--version prints package.json's version", async () => {
    const result = await baton("--version")
    expect(result.code).toBe(0)
    expect(result.stdout.trim()).toBe(pkg.version)
  })

  it("journal --help brackets the repeatable --type", async () => {
    const result = await baton("journal", "--help")
    expect(result.code).toBe(0)
    // eslint-disable-next-line no-control-regex
    const plain = result.stdout.replace(/\x1b\[[0-9;]*m/g, "")
    const synopsis = plain.split("\n").find((line) => line.startsWith("$ journal"))
    expect(synopsis).toContain("[--type text...]")
    expect(synopsis).not.toMatch(/[^[]--type text\.\.\./)
  })
})
