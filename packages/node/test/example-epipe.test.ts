/**
 * A worker whose coordinator's pipe is closed keeps serving quietly: it completes the run without an EPIPE
 * crash and stops on SIGTERM with exit 0 and nothing on stderr.
 */
import type * as ControlSchema from "@baton/control/ControlSchema"
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { baton, configModule, migratedDatabase, tempDir } from "./cli-support.js"

const workerScript = fileURLToPath(new URL("../src/example/worker.ts", import.meta.url))

describe("example worker on a closed stdout", () => {
  it("drives a run to completion and exits 0 on SIGTERM without an EPIPE trace", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    const root = path.join(dir, "tree")
    fs.mkdirSync(root)
    for (let i = 0; i < 5; i++) fs.writeFileSync(path.join(root, `f${i}.txt`), `file ${i}`)
    await migratedDatabase(db)
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", configModule)
    expect((await cli("plan", "index-dir", "--input", JSON.stringify({ root }))).code).toBe(0)
    expect((await cli("approve", "plan-1")).code).toBe(0)
    const runId = (await cli("launch", "plan-1")).stdout.split("\n")[0]!
    const worker = spawnFixture(workerScript, [db, "w1"])
    // The coordinator is gone before the worker's first line: every line it writes meets EPIPE.
    worker.stdout!.destroy()
    const done = completion(worker)
    let exited = false
    void done.then(() => (exited = true))
    let status = "accepted"
    while (!exited && status !== "completed") {
      await new Promise((resolve) => setTimeout(resolve, 200))
      const shown = await cli("run", runId, "--json")
      status = (JSON.parse(shown.stdout) as { summary: ControlSchema.RunSummary }).summary.status
    }
    expect(exited, "the worker died before completing the run").toBe(false)
    expect(status).toBe("completed")
    worker.kill("SIGTERM")
    const result = await done
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
  }, 90_000)
})
