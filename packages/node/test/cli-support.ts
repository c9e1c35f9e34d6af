/**
 * Test support for the CLI: run `baton` in-process over argv and capture what it prints.
 */
import type * as ControlSchema from "@baton/control/ControlSchema"
import { expect } from "@effect/vitest"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import * as Cli from "../src/Cli.js"
import * as IndexDir from "../src/example/IndexDir.js"
import * as NodeRuntime from "../src/NodeRuntime.js"

/** The config module exporting the example's catalog. */
export const configModule = fileURLToPath(new URL("./fixtures/cli-config.ts", import.meta.url))

/** What one CLI invocation printed and its exit code. */
export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs `baton <args>` in this process. */
export const baton = (...args: ReadonlyArray<string>): Promise<CliResult> =>
  Effect.runPromise(
    Effect.gen(function*() {
      const current = yield* Effect.console
      let stdout = ""
      let stderr = ""
      const capture: Console.Console = {
        ...current,
        log: (...parts: ReadonlyArray<unknown>) => Effect.sync(() => void (stdout += parts.map(String).join(" ") + "\n")),
        error: (...parts: ReadonlyArray<unknown>) => Effect.sync(() => void (stderr += parts.map(String).join(" ") + "\n"))
      }
      const code = yield* Cli.run(["node", "baton", ...args]).pipe(Effect.withConsole(capture))
      return { code, stdout, stderr }
    })
  )

/** A fresh temp directory. */
export const tempDir = (): string => fs.mkdtempSync(path.join(os.tmpdir(), "baton-cli-"))

/** Creates and migrates a database file with the example's catalog (a client-mode runtime). */
export const migratedDatabase = (filename: string): Promise<void> =>
  Effect.runPromise(
    Effect.void.pipe(
      Effect.provide(Layer.orDie(NodeRuntime.layer({
        filename,
        mode: "client",
        flows: [IndexDir.flow],
        migrations: [IndexDir.migrations]
      })))
    )
  )

/** Every file in `dir` with its bytes, for "nothing was written" checks. */
export const snapshot = (dir: string): Record<string, string> =>
  Object.fromEntries(
    fs.readdirSync(dir).sort().map((name) => [name, fs.readFileSync(path.join(dir, name)).toString("base64")])
  )

/** A migrated database in a fresh directory with a one-file tree, and `cli` bound to it and the example catalog. */
export const exampleDatabase = async () => {
  const dir = tempDir()
  const db = path.join(dir, "baton.db")
  const root = path.join(dir, "tree")
  fs.mkdirSync(root)
  fs.writeFileSync(path.join(root, "a.txt"), "a")
  await migratedDatabase(db)
  const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", configModule)
  return { dir, db, root, cli }
}

/** `status` (a run's summary through `baton run --json`) and `launch` (plan, approve, launch; the run id) over `cli`. */
export const runVerbs = (cli: (...args: ReadonlyArray<string>) => Promise<CliResult>) => ({
  status: async (runId: string) =>
    (JSON.parse((await cli("run", runId, "--json")).stdout) as { summary: ControlSchema.RunSummary }).summary,
  launch: async (flow: string, planId: string) => {
    expect((await cli("plan", flow, "--input", "{}")).code).toBe(0)
    expect((await cli("approve", planId)).code).toBe(0)
    const launched = await cli("launch", planId)
    expect(launched.code, launched.stderr).toBe(0)
    return launched.stdout.split("\n")[0]!
  }
})

/** Start the waiting-flows host fixture on `db` (`wait-approval` at `version`); resolves once it printed "ready". */
export const startWaitHost = async (db: string, version = "1") => {
  const host = spawnFixture(new URL("./fixtures/cli-wait-host.ts", import.meta.url), [db, version])
  const done = completion(host)
  await new Promise<void>((resolve, reject) => {
    let out = ""
    host.stdout?.on("data", (chunk) => {
      out += String(chunk)
      if (out.includes("ready")) resolve()
    })
    host.once("exit", (code) => reject(new Error(`host exited ${code}`)))
  })
  return { host, done }
}
