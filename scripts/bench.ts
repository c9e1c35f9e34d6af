/**
 * `pnpm bench`: run every `scripts/bench/*.ts` in sequence, each in its own process
 * (tsx, with the workspace's source paths), printing its results as it goes.
 * Usage: `pnpm bench [-- <name> ...]` to run only the named benchmarks (e.g. `database`);
 * options (`--json`) are passed to every benchmark run.
 * Exits non-zero if any benchmark failed.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const benchDir = path.join(repoRoot, "scripts", "bench")
const args = process.argv.slice(2).filter((arg) => arg !== "--")
const only = args.filter((arg) => !arg.startsWith("--"))
const flags = args.filter((arg) => arg.startsWith("--"))

const files = fs
  .readdirSync(benchDir)
  .filter((name) => name.endsWith(".ts"))
  .filter((name) => only.length === 0 || only.includes(path.basename(name, ".ts")))
  .sort()

const run = (file: string): Promise<number> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(benchDir, file), ...flags], {
      cwd: repoRoot,
      stdio: "inherit",
      env: { ...process.env, TSX_TSCONFIG_PATH: path.join(repoRoot, "tsconfig.base.json") }
    })
    child.on("close", (code) => resolve(code ?? 1))
  })

let failed = 0
for (const file of files) {
  process.stdout.write(`\n=== bench: ${file} ===\n`)
  const code = await run(file)
  if (code !== 0) {
    failed++
    process.stdout.write(`=== bench: ${file} failed (exit ${code}) ===\n`)
  }
}
process.exit(failed === 0 ? 0 : 1)
