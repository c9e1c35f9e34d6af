/**
 * `pnpm bench:indexer` (node.md 7.6): the main job measured end to end.
 *
 * - E1: hashing-phase rate of the Baton run ÷ the plain single-process loop over the same files
 *   (three `pnpm start -- --yes --compare --json` runs on fresh files; median);
 * - E2: command to summary, wall time of each of those runs (median);
 * - E3: recovery after SIGKILL of the owner: one `--crash-demo --yes --json` run, kill → takeover.
 *
 * Usage: `pnpm bench:indexer [-- --runs 3] [--no-crash] [dir]`. Prints a table and one JSON line.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const startScript = path.join(repoRoot, "scripts", "start.ts")

interface StartSummary {
  readonly status: string
  readonly files: number
  readonly bytes: number
  readonly filesPerSecond?: number
  readonly hashingMs?: number
  readonly recoveryMs?: number
  readonly takeovers: number
  readonly compare?: { readonly plainFilesPerSecond: number; readonly ratio?: number }
  readonly plain?: { readonly hashMs: number }
}

const runStart = (args: ReadonlyArray<string>): Promise<{ readonly wallMs: number; readonly summary: StartSummary }> =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    const child = spawn(process.execPath, [...process.execArgv, startScript, ...args], { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += String(chunk)))
    child.stderr.on("data", (chunk) => (stderr += String(chunk)))
    child.on("close", (code) => {
      const wallMs = performance.now() - started
      const last = stdout.trim().split("\n").at(-1) ?? ""
      try {
        const summary = JSON.parse(last) as StartSummary
        if (code !== 0) return reject(new Error(`pnpm start ${args.join(" ")} exited ${code}: ${stderr}`))
        resolve({ wallMs, summary })
      } catch {
        reject(new Error(`pnpm start ${args.join(" ")} exited ${code} without a JSON summary: ${stderr || stdout}`))
      }
    })
  })

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const main = async () => {
  const argv = process.argv.slice(2).filter((a) => a !== "--")
  let runs = 3
  let crash = true
  const rest: Array<string> = []
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--runs") runs = Number(argv[++i])
    else if (argv[i] === "--no-crash") crash = false
    else rest.push(argv[i]!)
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "baton-bench-indexer-"))
  const results: Array<{ wallMs: number; summary: StartSummary }> = []
  for (let i = 0; i < runs; i++) {
    const result = await runStart([...rest, "--yes", "--compare", "--json", "--db", path.join(tmp, `run-${i}.db`)])
    results.push(result)
    const s = result.summary
    process.stderr.write(
      `run ${i + 1}: ${s.files} files, baton ${Math.round(s.filesPerSecond ?? 0)} files/s, plain ${Math.round(s.compare?.plainFilesPerSecond ?? 0)} files/s, ratio ${(s.compare?.ratio ?? 0).toFixed(2)}, command ${(result.wallMs / 1000).toFixed(1)} s\n`
    )
  }
  let recoveryMs: number | undefined
  if (crash) {
    const demo = await runStart([...rest, "--crash-demo", "--yes", "--json", "--db", path.join(tmp, "crash.db")])
    recoveryMs = demo.summary.recoveryMs
    process.stderr.write(`crash demo: takeovers ${demo.summary.takeovers}, recovery ${((recoveryMs ?? NaN) / 1000).toFixed(1)} s\n`)
  }
  const report = {
    machine: `${os.cpus().length} cores, ${os.cpus()[0]?.model ?? "?"}, load ${os.loadavg().map((l) => l.toFixed(1)).join("/")}`,
    files: results[0]?.summary.files,
    bytes: results[0]?.summary.bytes,
    batonFilesPerSecond: median(results.map((r) => r.summary.filesPerSecond ?? 0)),
    plainFilesPerSecond: median(results.map((r) => r.summary.compare?.plainFilesPerSecond ?? 0)),
    e1Ratio: median(results.map((r) => r.summary.compare?.ratio ?? 0)),
    e2CommandMs: median(results.map((r) => r.wallMs)),
    // The same command without the plain loop's hashing (pnpm start -- --yes does not run it).
    e2WithoutCompareMs: median(results.map((r) => r.wallMs - (r.summary.plain?.hashMs ?? 0))),
    e3RecoveryMs: recoveryMs
  }
  process.stdout.write(
    [
      `| quantity | value |`,
      `| --- | --- |`,
      `| files / bytes | ${report.files} / ${report.bytes} |`,
      `| Baton hashing-phase rate (median) | ${Math.round(report.batonFilesPerSecond)} files/s |`,
      `| plain loop rate (median) | ${Math.round(report.plainFilesPerSecond)} files/s |`,
      `| E1 ratio (median; goal ≥ 0.5) | ${report.e1Ratio.toFixed(2)} |`,
      `| E2 command to summary (median; goal ≤ 15 s) | ${(report.e2WithoutCompareMs / 1000).toFixed(1)} s (${(report.e2CommandMs / 1000).toFixed(1)} s with --compare) |`,
      `| E3 SIGKILL → takeover (goal 29–33 s) | ${report.e3RecoveryMs === undefined ? "-" : `${(report.e3RecoveryMs / 1000).toFixed(1)} s`} |`,
      `| machine | ${report.machine} |`
    ].join("\n") + "\n"
  )
  process.stdout.write(`${JSON.stringify(report)}\n`)
  fs.rmSync(tmp, { recursive: true, force: true })
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:indexer: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
})
