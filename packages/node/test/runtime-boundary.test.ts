/** node.md check 31: outside `example/`, no source names a `flows_*` or `control_*` table. */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src")

const sources = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return entry.name === "example" ? [] : sources(full)
    return entry.name.endsWith(".ts") ? [full] : []
  })

describe("public APIs only", () => {
  it("no package source outside example/ names a flows_* or control_* table", () => {
    const files = sources(src)
    expect(files.length).toBeGreaterThan(10)
    const offenders = files.flatMap((file) =>
      fs.readFileSync(file, "utf8").split("\n").flatMap((line, index) =>
        /\b(flows|control)_[a-z][a-z_]*\b/.test(line) ? [`${path.relative(src, file)}:${index + 1}: ${line.trim()}`] : []
      )
    )
    expect(offenders).toEqual([])
  })
})
