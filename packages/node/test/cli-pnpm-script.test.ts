/**
 * The repository's `pnpm baton` script: it runs in the repository root, yet a relative `--db` names a
 * file in the directory the user ran pnpm from, and the default catalog is still the repository's.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { tempDir } from "./cli-support.js"

const repoRoot = fileURLToPath(new URL("../../..", import.meta.url))

const pnpmBaton = (cwd: string, ...args: ReadonlyArray<string>) => {
  const env = { ...process.env }
  delete env.BATON_CONFIG
  delete env.INIT_CWD
  return spawnSync("pnpm", ["--silent", "-C", repoRoot, "baton", ...args], { cwd, encoding: "utf8", env })
}

describe("pnpm baton from another directory", () => {
  it("resolves a relative --db against the directory pnpm ran from and loads the repository's catalog", () => {
    const dir = fs.realpathSync(tempDir())
    const missing = pnpmBaton(dir, "runs", "--db", "greet.db")
    expect(missing.status, missing.stderr).toBe(5)
    expect(missing.stderr).toContain(`no database at ${path.join(dir, "greet.db")}`)
    expect(fs.existsSync(path.join(repoRoot, "greet.db"))).toBe(false)
    const unknown = pnpmBaton(dir, "plan", "nope", "--db", "greet.db")
    expect(unknown.status, unknown.stderr).toBe(2)
    expect(unknown.stderr).toContain(`flow "nope" is not registered here (known: index-dir)`)
  }, 120_000)

  it("pnpm start resolves a relative directory and --db against the directory pnpm ran from", () => {
    const dir = fs.realpathSync(tempDir())
    fs.mkdirSync(path.join(dir, "tree"))
    for (const name of ["a.txt", "b.txt", "c.txt"]) fs.writeFileSync(path.join(dir, "tree", name), name)
    const env = { ...process.env }
    delete env.INIT_CWD
    const started = spawnSync("pnpm", ["--silent", "-C", repoRoot, "start", "--", "tree", "--yes", "--json", "--db", "here.db"], {
      cwd: dir,
      encoding: "utf8",
      env
    })
    expect(started.status, started.stderr).toBe(0)
    const summary = JSON.parse(started.stdout.trim().split("\n").at(-1)!) as { status: string; files: number; root: string }
    expect(summary).toMatchObject({ status: "completed", files: 3, root: path.join(dir, "tree") })
    expect(fs.existsSync(path.join(dir, "here.db"))).toBe(true)
    expect(fs.existsSync(path.join(repoRoot, "here.db"))).toBe(false)
  }, 120_000)
})
