/**
 * Every ```ts block in README.md and docs/ is a complete module that must type-check against the
 * repository's sources (tsconfig.base.json paths), so the documentation cannot drift from the API.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const repoRoot = path.resolve(packageRoot, "../..")

const markdownFiles = (): ReadonlyArray<string> => {
  const docs = path.join(repoRoot, "docs")
  const walk = (dir: string): Array<string> =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? walk(path.join(dir, entry.name)) : entry.name.endsWith(".md") ? [path.join(dir, entry.name)] : []
    )
  return [path.join(repoRoot, "README.md"), ...(fs.existsSync(docs) ? walk(docs) : [])]
}

/** The ```ts / ```typescript blocks of a markdown text, with their starting line. */
export const tsBlocks = (text: string): ReadonlyArray<{ readonly line: number; readonly code: string }> => {
  const blocks: Array<{ line: number; code: string }> = []
  const lines = text.split("\n")
  let open: { line: number; body: Array<string> } | undefined
  lines.forEach((line, index) => {
    if (open === undefined) {
      if (/^```(ts|typescript)\s*$/.test(line.trim())) open = { line: index + 1, body: [] }
    } else if (line.trim() === "```") {
      blocks.push({ line: open.line, code: open.body.join("\n") })
      open = undefined
    } else {
      open.body.push(line)
    }
  })
  return blocks
}

describe("docs", () => {
  it("finds the code blocks of a markdown file", () => {
    const blocks = tsBlocks("intro\n```ts\nconst a = 1\n```\n```sh\nls\n```\n```typescript\nconst b = 2\n```\n")
    expect(blocks).toEqual([{ line: 2, code: "const a = 1" }, { line: 8, code: "const b = 2" }])
  })

  it("README.md and every docs page have type-correct TypeScript blocks", async () => {
    // Inside packages/node/node_modules so `effect` and the @effect packages resolve as for the package.
    const dir = fs.mkdtempSync(path.join(packageRoot, "node_modules", ".docs-check-"))
    try {
      const sources: Array<string> = []
      for (const file of markdownFiles()) {
        const relative = path.relative(repoRoot, file)
        tsBlocks(fs.readFileSync(file, "utf8")).forEach((block, index) => {
          const name = `${relative.replace(/[^a-zA-Z0-9]+/g, "_")}_${index + 1}_line${block.line}.ts`
          // Each block is its own module.
          fs.writeFileSync(path.join(dir, name), `${block.code}\nexport {}\n`)
          sources.push(name)
        })
      }
      expect(sources.length).toBeGreaterThan(0)
      fs.writeFileSync(
        path.join(dir, "tsconfig.json"),
        JSON.stringify({
          extends: path.join(repoRoot, "tsconfig.base.json"),
          compilerOptions: { noEmit: true, noUnusedLocals: false, noUnusedParameters: false },
          files: sources
        })
      )
      const tsc = path.join(repoRoot, "node_modules", "typescript", "bin", "tsc")
      // Asynchronously: a blocked worker would miss vitest's RPC deadlines.
      const result = await new Promise<{ output: string; status: number | null }>((resolve) => {
        const child = spawn(process.execPath, [tsc, "-p", path.join(dir, "tsconfig.json")])
        let output = ""
        child.stdout.on("data", (chunk) => (output += String(chunk)))
        child.stderr.on("data", (chunk) => (output += String(chunk)))
        child.on("close", (status) => resolve({ output, status }))
      })
      expect(result.output).toBe("")
      expect(result.status).toBe(0)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 240_000)
})
