/**
 * Test support: run a TypeScript fixture in a real child process.
 *
 * Fixtures import Baton packages by their public names; tsx resolves them to
 * sources through the package's tsconfig paths, so no build is needed.
 */
import { type ChildProcess, spawn, type SpawnOptions } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..")

/** The tsconfig whose paths map `@baton/*` to sources. */
export const tsconfigPath = path.join(repoRoot, "packages", "database", "tsconfig.json")

/** Spawn `fixture` (an absolute path or file URL) under tsx with `args`. */
export const spawnFixture = (
  fixture: string | URL,
  args: ReadonlyArray<string> = [],
  options: SpawnOptions = {}
): ChildProcess => {
  const file = fixture instanceof URL ? fileURLToPath(fixture) : fixture
  return spawn(process.execPath, ["--import", "tsx", file, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    ...options,
    env: { ...process.env, TSX_TSCONFIG_PATH: tsconfigPath, ...options.env }
  })
}

/** Resolve with the child's exit code and collected output. */
export const completion = (child: ChildProcess): Promise<{
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}> =>
  new Promise((resolve, reject) => {
    let stdout = ""
    let stderr = ""
    child.stdout?.on("data", (chunk) => (stdout += String(chunk)))
    child.stderr?.on("data", (chunk) => (stderr += String(chunk)))
    child.once("error", reject)
    child.once("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
  })

/** Run a fixture to completion; reject with its stderr when it exits non-zero. */
export const runFixture = async (
  fixture: string | URL,
  args: ReadonlyArray<string> = [],
  options: SpawnOptions = {}
) => {
  const result = await completion(spawnFixture(fixture, args, options))
  if (result.code !== 0) {
    throw new Error(`fixture ${String(fixture)} exited ${result.code ?? result.signal}: ${result.stderr}`)
  }
  return result
}
