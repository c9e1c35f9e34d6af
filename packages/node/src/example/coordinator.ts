/**
 * The main job's coordinator (`pnpm start`): plans `index-dir`, asks for approval,
 * spawns the worker processes, launches the run, shows progress, optionally kills the owner
 * (`--crash-demo`), and prints the summary.
 *
 * @since 0.1.0
 */
import * as Control from "@baton/control/Control"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import type * as ControlSchema from "@baton/control/ControlSchema"
import * as Journal from "@baton/journal/Journal"
import type * as JournalEvent from "@baton/journal/JournalEvent"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as nodePath from "node:path"
import * as readline from "node:readline/promises"
import { fileURLToPath } from "node:url"
import * as NodeRuntime from "../NodeRuntime.js"
import * as Args from "../internal/exampleArgs.js"
import * as Progress from "../internal/exampleProgress.js"
import * as Table from "../internal/cliTable.js"
import { fromError, render } from "../internal/cliFailure.js"
import * as Batches from "./batches.js"
import * as Glob from "./glob.js"
import * as IndexDir from "./IndexDir.js"
import * as PlainLoop from "./plainLoop.js"
import * as Walk from "./walk.js"

const staleAfterMs = 30_000
const readyTimeoutMs = 90_000

/** A worker process and what it told us. */
interface Worker {
  readonly label: string
  readonly child: ChildProcess
  pid: number
  ready: boolean
  exited: boolean
  killed: boolean
}

class Exit2 extends Error {
  constructor(readonly code: number, message: string) {
    super(message)
  }
}

const now = () => Date.now()

/** Output that keeps a redrawn progress line at the bottom of a TTY. */
const makeOutput = (tty: boolean, quiet: boolean) => {
  let current = ""
  return {
    event: (text: string) => {
      if (quiet) return
      if (tty && current !== "") process.stdout.write(`\r\x1b[K${text}\n${current}`)
      else process.stdout.write(`${text}\n`)
    },
    progress: (text: string) => {
      if (quiet || !tty) return
      current = text
      process.stdout.write(`\r\x1b[K${text}`)
    },
    plain: (text: string) => {
      if (quiet) return
      process.stdout.write(`${text}\n`)
    },
    done: () => {
      if (tty && current !== "") process.stdout.write("\n")
      current = ""
    }
  }
}

const workerScript = (): string => {
  const here = fileURLToPath(import.meta.url)
  return nodePath.join(nodePath.dirname(here), here.endsWith(".ts") ? "worker.ts" : "worker.js")
}

const spawnWorker = (filename: string, label: string, verbose: boolean, onLine: (w: Worker, kind: string, value: any) => void): Worker => {
  const child = spawn(process.execPath, [...process.execArgv, workerScript(), filename, label], {
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, BATON_WORKER_WATCH_STDIN: "1" }
  })
  const worker: Worker = { label, child, pid: child.pid ?? -1, ready: false, exited: false, killed: false }
  const lines = readline.createInterface({ input: child.stdout! })
  lines.on("line", (text) => {
    const space = text.indexOf(" ")
    const kind = space < 0 ? text : text.slice(0, space)
    if (kind === "ready" || kind === "event") {
      try {
        onLine(worker, kind, JSON.parse(text.slice(space + 1)))
        return
      } catch {
        // fall through: print as a log line
      }
    }
    if (verbose) process.stderr.write(`[${label}] ${text}\n`)
  })
  const errors = readline.createInterface({ input: child.stderr! })
  errors.on("line", (text) => {
    if (verbose) process.stderr.write(`[${label}] ${text}\n`)
  })
  child.on("exit", () => {
    worker.exited = true
  })
  return worker
}

const waitFor = (predicate: () => boolean, timeoutMs: number, pollMs = 50): Promise<boolean> =>
  new Promise((resolve) => {
    const start = now()
    const tick = () => {
      if (predicate()) return resolve(true)
      if (now() - start >= timeoutMs) return resolve(false)
      setTimeout(tick, pollMs)
    }
    tick()
  })

const stopWorkers = async (workers: ReadonlyArray<Worker>, say: (s: string) => void): Promise<void> => {
  for (const w of workers) if (!w.exited) w.child.kill("SIGTERM")
  const stopped = await waitFor(() => workers.every((w) => w.exited), 15_000)
  if (!stopped) {
    for (const w of workers) {
      if (!w.exited) {
        say(`${w.label} (pid ${w.pid}) did not stop within 15 s after SIGTERM; killing it`)
        w.child.kill("SIGKILL")
      }
    }
    await waitFor(() => workers.every((w) => w.exited), 5_000)
  }
}

const ownerOf = (summary: ControlSchema.RunSummary): { hostId: string; pid: number } | undefined => {
  if (summary.ownerId === undefined) return undefined
  try {
    const o = JSON.parse(summary.ownerId) as { hostId: string; pid: number }
    return typeof o.pid === "number" ? o : undefined
  } catch {
    return undefined
  }
}

const terminal = new Set(["completed", "failed", "cancelled"])

/**
 * Runs the main job over `argv` (without node and the script) and answers the process exit code.
 *
 * @since 0.1.0
 * @category running
 */
export const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  let options: Args.StartOptions
  try {
    const parsed = Args.parse(argv)
    if (parsed === "help") {
      process.stdout.write(`${Args.usage}\n`)
      return 0
    }
    options = parsed
  } catch (error) {
    process.stderr.write(`start: ${error instanceof Error ? error.message : String(error)}\n`)
    return 2
  }
  try {
    if (!fs.statSync(options.dir).isDirectory()) throw new Error("not a directory")
    fs.accessSync(options.dir, fs.constants.R_OK | fs.constants.X_OK)
  } catch {
    process.stderr.write(`start: ${options.dir} is not a readable directory\n`)
    return 2
  }
  let pattern: Glob.Glob | undefined
  try {
    pattern = options.pattern === undefined ? undefined : Glob.compile(options.pattern)
  } catch (error) {
    process.stderr.write(`start: --${(error as Error).message}\n`)
    return 2
  }
  const filename = nodePath.resolve(options.db)
  // Commands printed for the user carry the database they must act on.
  const db = Args.dbSuffix(options.db)
  const tty = process.stdout.isTTY === true && !options.json
  const out = makeOutput(tty, options.json)
  const workers: Array<Worker> = []
  let interrupted = false
  const onSigint = () => {
    interrupted = true
  }
  process.on("SIGINT", onSigint)
  process.on("SIGTERM", onSigint)

  const program = Effect.gen(function*() {
    const control = yield* Control.Control
    const runtime = yield* ControlRuntime.ControlRuntime
    const journal = yield* Journal.Journal
    const store = yield* RunStore.RunStore
    const attempts = yield* AttemptStore.AttemptStore
    const sql = yield* SqlClient.SqlClient
    const startedAt = now()

    // 1. compare, plan
    let plain: PlainLoop.PlainLoopResult | undefined
    if (options.compare) {
      out.plain(`timing the plain loop over ${options.dir} …`)
      plain = yield* PlainLoop.run(options.dir, pattern)
      out.plain(`plain loop: ${Table.count(plain.files)} files in ${Table.duration(plain.hashMs)} (${Table.count(plain.filesPerSecond)} files/s)`)
    }
    let runId: string
    let holdAt: { batch: number; files: number } | undefined
    if (options.resume === undefined) {
      if (options.crashDemo) {
        const listing = yield* Walk.walk(options.dir, { pattern })
        const batches = Batches.cut(listing.files, options.batchFiles, options.batchBytes)
        holdAt = { batch: Math.max(1, Math.ceil(batches.length * 0.4)), files: Math.floor(options.batchFiles / 4) }
      }
      const input = {
        root: options.dir,
        ...(options.pattern === undefined ? {} : { pattern: options.pattern }),
        batchFiles: options.batchFiles,
        batchBytes: options.batchBytes,
        ...(holdAt === undefined ? {} : { holdAt })
      }
      const card = yield* control.plan({ flowId: IndexDir.flowId, input })
      out.plain(Table.keyValues([
        ["plan", card.planId],
        ["flow", card.flowId],
        ["directory", options.dir],
        ["digest", card.digest.slice(0, 12)],
        ["capabilities", card.envelope.capabilities.join(", ")],
        ...(holdAt === undefined ? [] : [["crash demo", `hold at batch ${holdAt.batch}, file ${holdAt.files}`] as const])
      ]))

      // 2. approval
      const decide = (decision: "approve" | "deny") =>
        (decision === "approve" ? control.approve : control.deny)({
          target: card.approval.target,
          scope: "run",
          idempotencyKey: `start:${decision}:${card.planId}`
        })
      if (options.yes) {
        yield* decide("approve")
        out.plain(`approved ${card.planId} (--yes)`)
      } else if (process.stdin.isTTY === true) {
        const answer = yield* Effect.promise(async () => {
          const rl = readline.createInterface({ input: process.stdin, output: process.stdout })
          try {
            return await rl.question(`Approve ${card.planId} (index-dir over ${options.dir}, ${card.digest.slice(0, 12)})? [y/N] `)
          } finally {
            rl.close()
          }
        })
        if (/^y(es)?$/i.test(answer.trim())) {
          yield* decide("approve")
        } else {
          yield* decide("deny")
          out.plain(`denied ${card.planId}`)
          return 4
        }
      } else {
        out.plain(`waiting for approval: pnpm baton approve ${card.planId}${db}`)
        for (;;) {
          if (interrupted) return 130
          const stored = yield* runtime.getPlan(card.planId)
          if (stored.decision === "approved") break
          if (stored.decision === "denied") {
            out.plain(`${card.planId} was denied`)
            return 4
          }
          yield* Effect.sleep("500 millis")
        }
      }

      // 3. workers
      yield* startWorkers()
      if (interrupted) return 130

      // 4. launch
      const receipt = yield* control.run({
        _tag: "Plan",
        planId: card.planId,
        digest: card.digest,
        envelope: card.envelope,
        idempotencyKey: `start:${card.planId}`
      })
      if ((receipt._tag !== "Accepted" && receipt._tag !== "AlreadyApplied") || receipt.runId === undefined) {
        out.plain(`launch refused: ${JSON.stringify(receipt)}`)
        return 4
      }
      runId = receipt.runId
      out.plain(`launched ${runId}; a worker will pick it up`)
    } else {
      runId = options.resume
      const summary = yield* control.getRun(runId)
      if (terminal.has(summary.status)) {
        out.plain(`${runId} is already ${summary.status}`)
      } else {
        yield* startWorkers()
        if (interrupted) return 130
        out.plain(`serving ${runId} (${summary.status})`)
      }
    }

    // 5. progress
    const labelOf = (pid: number | undefined): string => {
      const w = workers.find((x) => x.pid === pid)
      return pid === undefined ? "none" : w === undefined ? `pid ${pid}` : `${w.label} (pid ${pid})`
    }
    let after: number | undefined
    let filesTotal: number | undefined
    let bytesTotal: number | undefined
    let takeovers = 0
    let killAtMs: number | undefined
    let recoveryMs: number | undefined
    let killedLabel: string | undefined
    let walkDoneAt: number | undefined
    let lastHashDoneAt: number | undefined
    let lastCountdown = 0
    const samples: Array<{ at: number; files: number }> = []
    let lastPlainProgress = 0
    let status = "accepted"
    let summary: ControlSchema.RunSummary
    for (;;) {
      if (interrupted) {
        out.done()
        yield* Effect.promise(() => stopWorkers(workers, out.plain))
        out.plain(`${runId} released; finish it with pnpm start -- --resume ${runId}${db}`)
        return 130
      }
      summary = yield* control.getRun(runId)
      status = summary.status
      const page = yield* journal.entries({ runId, limit: 1000, ...(after === undefined ? {} : { after }) })
      for (const entry of page.entries as ReadonlyArray<JournalEvent.Entry>) {
        after = entry.seq
        const payload = (entry.payload ?? {}) as Record<string, any>
        if (entry.eventType === "baton.step.completed") {
          if (payload["step"] === "walk") {
            walkDoneAt = entry.emittedAtMs
            filesTotal = payload["detail"]?.files
            bytesTotal = payload["detail"]?.bytes
          } else if (typeof payload["step"] === "string" && payload["step"].startsWith("hash-")) {
            lastHashDoneAt = entry.emittedAtMs
          }
        } else if (entry.eventType === "baton.run.taken-over") {
          takeovers++
          const from = payload["from"] ?? {}
          const by = ownerOf(summary)
          const afterKill = killAtMs !== undefined && recoveryMs === undefined
          if (afterKill) recoveryMs = entry.emittedAtMs - killAtMs!
          // Two different clocks, both labelled: time since the kill (the summary's recovery time) and the
          // lease's age, which also counts the heartbeat interval before the kill.
          const leaseAge = typeof payload["leaseAgeMs"] === "number" ? `lease ${Table.duration(payload["leaseAgeMs"])} without a heartbeat` : undefined
          const sinceKill = afterKill && recoveryMs !== undefined ? `${Table.duration(recoveryMs)} after the kill` : undefined
          const timing = [sinceKill, leaseAge].filter((x) => x !== undefined)
          out.event(`${labelOf(by?.pid)} took over ${runId} from ${labelOf(from.pid)}${timing.length === 0 ? "" : ` (${timing.join("; ")})`}${holdAt === undefined ? "" : `; ${Batches.stepName(holdAt.batch, 10)} resumes at file ${holdAt.files}`}`)
        } else if (entry.eventType === "baton.run.driven") {
          const owner = payload["owner"] ?? {}
          if (payload["cause"] !== "takeover") out.event(`${labelOf(owner.pid)} drives ${runId} (drive ${payload["drive"]}, ${payload["cause"]})`)
        } else if (entry.eventType === "baton.run.released") {
          out.event(`${runId} released (${payload["reason"]})`)
        } else if (entry.eventType === "index.held" && options.crashDemo && killAtMs === undefined) {
          const owner = ownerOf(summary)
          const victim = workers.find((w) => w.pid === owner?.pid)
          if (victim !== undefined) {
            victim.child.kill("SIGKILL")
            victim.killed = true
            killAtMs = now()
            killedLabel = `${victim.label} (pid ${victim.pid})`
            out.event(`crash demo: SIGKILL ${killedLabel} while it owns ${runId} inside ${payload["step"]} at file ${payload["files"]}`)
          }
        }
      }
      // Countdown to staleness after the kill.
      if (killAtMs !== undefined && recoveryMs === undefined && now() - lastCountdown >= (tty ? 1000 : 5000)) {
        lastCountdown = now()
        const row = yield* store.get(runId).pipe(Effect.option)
        const hb = row._tag === "Some" ? row.value.heartbeatAtMs : null
        if (hb !== null) {
          const left = Math.max(0, Math.ceil((staleAfterMs - (now() - hb)) / 1000))
          out.event(left > 0 ? `lease of ${killedLabel} goes stale in ${left} s` : `lease of ${killedLabel} is stale; waiting for a worker's sweep`)
        }
      }
      const [counts] = yield* sql<{ files: number | string; bytes: number | string | null }>`
        SELECT COUNT(*) AS files, SUM(size) AS bytes FROM index_dir_files WHERE run_id = ${runId}`
      const filesDone = Number(counts?.files ?? 0)
      samples.push({ at: now(), files: filesDone })
      while (samples.length > 1 && samples[0]!.at < now() - 2000) samples.shift()
      const first = samples[0]!
      const rate = now() - first.at > 0 ? ((filesDone - first.files) * 1000) / (now() - first.at) : 0
      const state: Progress.ProgressState = {
        filesDone,
        filesTotal,
        bytesDone: Number(counts?.bytes ?? 0),
        bytesTotal,
        rate,
        owner: labelOf(ownerOf(summary)?.pid),
        takeovers,
        status
      }
      if (tty) out.progress(Progress.line(state))
      else if (now() - lastPlainProgress >= 2000) {
        lastPlainProgress = now()
        out.event(Progress.line(state))
      }
      if (terminal.has(status)) break
      if (workers.length > 0 && workers.every((w) => w.exited)) {
        out.done()
        out.plain(`every worker exited; finish ${runId} with pnpm start -- --resume ${runId}${db}`)
        return 1
      }
      yield* Effect.sleep("200 millis")
    }
    out.done()

    // 6. stop workers, summary
    yield* Effect.promise(() => stopWorkers(workers, out.plain))
    const list = yield* attempts.list(runId)
    const result = list.find((a) => (a.meta as { name?: unknown })?.name === "$result")
    const value = (result?.outcome as { value?: IndexDir.Result } | undefined)?.value
    const [counts] = yield* sql<{ files: number | string; bytes: number | string | null }>`
      SELECT COUNT(*) AS files, SUM(size) AS bytes FROM index_dir_files WHERE run_id = ${runId}`
    const stepAttempts = list.filter((a) => !String((a.meta as { name?: unknown })?.name ?? "").startsWith("$"))
    // A run without a result (cancelled, failed) still has its own root and batches: the root from its
    // plan's input (not this coordinator's default directory after `--resume`), the batches from its stored
    // walk cut the way the flow cuts it.
    const own = value === undefined ? yield* runFacts(summary, stepAttempts) : undefined
    const window = Progress.hashingWindow({ startedAt, walkDoneAt, lastHashDoneAt })
    const hashingMs = window?.ms
    const files = value?.files ?? Number(counts?.files ?? 0)
    const [hashed] = window === undefined ? [] : yield* sql<{ files: number | string }>`
      SELECT COUNT(*) AS files FROM index_dir_files WHERE run_id = ${runId} AND indexed_at_ms >= ${window.fromMs}`
    const filesPerSecond = window === undefined ? undefined : (Number(hashed?.files ?? 0) * 1000) / window.ms
    const report: Progress.Summary = {
      runId,
      status,
      root: value?.root ?? own?.root ?? options.dir,
      files,
      bytes: value?.bytes ?? Number(counts?.bytes ?? 0),
      missing: value?.missing ?? 0,
      unreadable: value?.unreadable ?? 0,
      changed: value?.changed ?? 0,
      skipped: value?.skipped ?? own?.skipped ?? 0,
      batches: value?.batches ?? own?.batches ?? 0,
      durationMs: now() - startedAt,
      hashingMs,
      filesPerSecond,
      stepsCompleted: stepAttempts.filter((a) => a.state === "completed").length,
      attempts: stepAttempts.length,
      workers: workers.map((w) => `${w.label} (pid ${w.pid})`),
      killed: workers.filter((w) => w.killed).map((w) => w.label),
      takeovers: value?.takeovers ?? takeovers,
      recoveryMs,
      resumedFromCheckpoint: value?.resumedFromCheckpoint ?? 0,
      error: status === "failed" ? JSON.stringify(result?.error ?? "see baton run " + runId) : undefined,
      compare: plain === undefined
        ? undefined
        : { plainFilesPerSecond: plain.filesPerSecond, ratio: filesPerSecond === undefined ? undefined : filesPerSecond / plain.filesPerSecond }
    }
    if (options.json) {
      process.stdout.write(`${JSON.stringify({ ...report, plain, commandMs: now() - startedAt })}\n`)
    } else {
      out.plain("")
      out.plain(Progress.summaryTable(report))
    }
    return status === "completed" ? 0 : status === "failed" ? 1 : 4
  })

  /** Root, skipped files and batch count of a run that has no result, from its plan and its `walk` step. */
  function runFacts(run: ControlSchema.RunSummary, stepAttempts: ReadonlyArray<AttemptStore.Attempt>) {
    return Effect.gen(function*() {
      const runtime = yield* ControlRuntime.ControlRuntime
      const plan = run.planId === undefined ? undefined : yield* runtime.getPlan(run.planId).pipe(
        Effect.orElseSucceed(() => undefined)
      )
      const input = (plan?.decodedInput ?? {}) as { root?: unknown; batchFiles?: unknown; batchBytes?: unknown }
      const walk = stepAttempts.find((a) => (a.meta as { name?: unknown })?.name === "walk" && a.state === "completed")
      const listing = (walk?.outcome as { value?: Walk.Listing } | undefined)?.value
      const batchFiles = typeof input.batchFiles === "number" ? input.batchFiles : IndexDir.defaultBatchFiles
      const batchBytes = typeof input.batchBytes === "number" ? input.batchBytes : IndexDir.defaultBatchBytes
      return {
        root: typeof input.root === "string" ? input.root : undefined,
        skipped: listing?.skipped,
        batches: listing === undefined ? undefined : Batches.cut(listing.files, batchFiles, batchBytes).length
      }
    })
  }

  function startWorkers() {
    return Effect.promise(async () => {
      for (let i = 1; i <= options.workers; i++) {
        workers.push(spawnWorker(filename, `w${i}`, options.verbose, (w, kind, value) => {
          if (kind === "ready") {
            w.ready = true
            w.pid = value.pid
            out.event(`${w.label} ready (pid ${value.pid})`)
          }
        }))
      }
      for (const w of workers) {
        // 30 s is plenty when warm; a loaded machine (tsx compiling, 2 cores) needs more for a cold start.
        const ok = await waitFor(() => w.ready || w.exited || interrupted, readyTimeoutMs)
        if (!ok || w.exited) {
          throw new Exit2(1, `worker ${w.label} did not become ready within ${readyTimeoutMs / 1000} s${w.exited ? " (it exited; rerun with --verbose)" : ""}`)
        }
      }
    })
  }

  const layer = NodeRuntime.layer({ filename, mode: "client", flows: [IndexDir.flow], migrations: [IndexDir.migrations] })
  const exit = await Effect.runPromiseExit(program.pipe(Effect.provide(layer)) as Effect.Effect<number, unknown>)
  process.off("SIGINT", onSigint)
  process.off("SIGTERM", onSigint)
  if (Exit.isSuccess(exit)) {
    if (workers.some((w) => !w.exited)) await stopWorkers(workers, out.plain)
    return exit.value
  }
  out.done()
  if (workers.some((w) => !w.exited)) await stopWorkers(workers, out.plain)
  const error = Cause.squash(exit.cause)
  if (error instanceof Exit2) {
    process.stderr.write(`start: ${error.message}\n`)
    return error.code
  }
  const failure = fromError(error, { location: filename, lockWaitMs: 5_000 })
  process.stderr.write(`${render(failure).replace(/^baton: /, "start: ")}\n`)
  // Not found (`--resume run-999`) and database unavailable keep the CLI's codes (docs/node.md).
  return failure.exitCode === 3 || failure.exitCode === 5 ? failure.exitCode : 1
}
