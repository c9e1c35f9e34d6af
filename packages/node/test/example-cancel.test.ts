/**
 * `pnpm start` on a run cancelled mid-run (node.md 7.3): the live summary and a later `--resume` of the
 * cancelled run show the run's own directory and its real batch count, not the default directory and 0.
 * Commands printed for the user name a non-default `--db`, shell-quoted.
 */
import { describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import { createRequire } from "node:module"
import { fileURLToPath, pathToFileURL } from "node:url"
import { completion, spawnFixture, tsconfigPath } from "../../database/test/support/processes.js"
import { baton, tempDir } from "./cli-support.js"
import * as Support from "./example-support.js"

const startScript = fileURLToPath(new URL("../../../scripts/start.ts", import.meta.url))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Resolves once the child's stdout matches `pattern`. */
const printed = (child: ChildProcess, pattern: RegExp): Promise<string> =>
  new Promise((resolve, reject) => {
    let text = ""
    child.stdout?.on("data", (chunk) => {
      text += String(chunk)
      if (pattern.test(text)) resolve(text)
    })
    child.once("exit", () => reject(new Error(`exited before printing ${pattern}: ${text}`)))
  })

describe("pnpm start: a cancelled run", () => {
  it("the live summary and --resume --json show the run's own root and its real batch count", async () => {
    // One file per batch: 1 500 batches, so the cancel lands long before the end.
    const root = Support.makeTree(1500)
    const db = path.join(tempDir(), "cx.db")
    const first = completion(spawnFixture(startScript, ["--", root, "--yes", "--batch-files", "1", "--db", db]))
    const runtime = Support.clientRuntime(db)
    try {
      // Cancel once some batches are in, well before the last.
      for (let i = 0; i < 600; i++) {
        const rows = await runtime.runPromise(Support.rows("run-1")).catch(() => [])
        if (rows.length >= 30) break
        await sleep(100)
      }
      const cancel = await baton("cancel", "run-1", "--reason", "stop", "--db", db)
      expect(cancel.code, cancel.stdout + cancel.stderr).toBe(0)
      const live = await first
      expect(live.code, live.stdout + live.stderr).toBe(4)
      expect(live.stdout).toMatch(new RegExp(`^directory\\s+${root.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`, "m"))
      expect(live.stdout).toMatch(/^batches\s+1500$/m)

      const resumed = await completion(spawnFixture(startScript, ["--", "--resume", "run-1", "--json", "--db", db]))
      expect(resumed.code, resumed.stdout + resumed.stderr).toBe(4)
      const summary = JSON.parse(resumed.stdout.trim().split("\n").at(-1)!) as {
        status: string
        root: string
        batches: number
        stepsCompleted: number
      }
      expect(summary.status).toBe("cancelled")
      expect(summary.root).toBe(root)
      expect(summary.batches).toBe(1500)
      expect(summary.stepsCompleted).toBeGreaterThan(1)
    } finally {
      await runtime.dispose()
    }
  }, 300_000)
})

describe("pnpm start: printed commands name the database", () => {
  const root = Support.makeTree(3)

  it("waiting for approval names a non-default --db, shell-quoted; the default database is left out", async () => {
    const db = path.join(tempDir(), "my db.db")
    const child = spawnFixture(startScript, ["--", root, "--db", db])
    const done = completion(child)
    await printed(child, /waiting for approval/)
    child.kill("SIGINT")
    const result = await done
    expect(result.code).toBe(130)
    expect(result.stdout).toContain(`waiting for approval: pnpm baton approve plan-1 --db '${db}'\n`)

    // The default database (./baton.db) in a scratch working directory; tsx by absolute URL from there.
    const cwd = tempDir()
    const plain = spawn(process.execPath, ["--import", pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href, startScript, "--", root], {
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, TSX_TSCONFIG_PATH: tsconfigPath }
    })
    const plainDone = completion(plain)
    await printed(plain, /waiting for approval/)
    plain.kill("SIGINT")
    expect((await plainDone).stdout).toContain("waiting for approval: pnpm baton approve plan-1\n")
  }, 120_000)

  it("Ctrl-C during the run: released; finish it with … --resume run-1 --db <file>", async () => {
    const many = Support.makeTree(1500)
    const db = path.join(tempDir(), "it's.db")
    const child = spawnFixture(startScript, ["--", many, "--yes", "--batch-files", "3", "--db", db])
    const done = completion(child)
    await printed(child, /launched run-1/)
    child.kill("SIGINT")
    const result = await done
    expect(result.code, result.stdout + result.stderr).toBe(130)
    expect(result.stdout).toContain(`run-1 released; finish it with pnpm start -- --resume run-1 --db '${db.replace("it's", "it'\\''s")}'\n`)
  }, 180_000)
})
