/**
 * What the queue bench's parent and its worker processes share: the systems and workloads, the
 * messages over the IPC channel, the worker-side recorder of handler starts, and the figures'
 * arithmetic. Times are epoch milliseconds with sub-millisecond precision
 * (`performance.timeOrigin + performance.now()`), comparable across processes on one machine.
 */
import { performance } from "node:perf_hooks"

/** The systems the bench compares. */
export const systems = ["baton-pg", "baton-sqlite", "pgboss", "graphile", "dbos"] as const
export type SystemName = typeof systems[number]

/** Where a system's run lives: a PostgreSQL schema (or a SQLite file) the parent created for it. */
export interface Target {
  readonly url: string
  readonly schema: string
  readonly filename?: string
}

/** How many jobs a worker process takes on at once (each system's own knob; see docs/benchmarks.md). */
export const perWorkerConcurrency = 16

/** Parent → worker. */
export type ToWorker =
  | { readonly type: "go" }
  | { readonly type: "stop" }

/** Worker → parent. */
export type FromWorker =
  | { readonly type: "ready" }
  | { readonly type: "report"; readonly report: WorkerReport }
  | { readonly type: "error"; readonly message: string }

/**
 * What a worker measured. `starts`: `[job index, handler start ms]` for every execution of a
 * handler (a job run twice appears twice). `cpuMs`: user + system CPU of the process from `go` to
 * `stop` (or over the W2 window). `rssMb`: the process's peak resident set (`maxRSS`).
 * W2 adds the window (`t0Ms` first start call, `t1Ms` last result) and each workflow's start-call
 * time (`availableAt`, by index), and Baton its driver counts over the window; the wake measurement
 * adds `wake`.
 */
export interface WorkerReport {
  readonly starts: ReadonlyArray<readonly [number, number]>
  readonly cpuMs: number
  readonly rssMb: number
  readonly t0Ms?: number
  readonly t1Ms?: number
  readonly availableAt?: ReadonlyArray<number>
  readonly counts?: { readonly transactions: number; readonly writeTransactions: number; readonly statements: number }
  /** Wake: when the host process sent each statement (ms, in order), and in `wake-self` its starts, by index. */
  readonly wake?: {
    readonly sentAt: ReadonlyArray<number>
    readonly starts?: ReadonlyArray<{ readonly runId: string; readonly committedAtMs: number }>
  }
}

/** Epoch milliseconds, sub-millisecond precision. */
export const nowMs = (): number => performance.timeOrigin + performance.now()

/** Records handler starts in a worker; a handler calls `started(index)` as its first act. */
export const makeRecorder = () => {
  const starts: Array<readonly [number, number]> = []
  return {
    started: (index: number) => {
      starts.push([index, nowMs()])
    },
    starts
  }
}
export type Recorder = ReturnType<typeof makeRecorder>

/** CPU ms of this process since `from` (a `process.cpuUsage()` reading). */
export const cpuMsSince = (from: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(from)
  return (used.user + used.system) / 1000
}

/** Peak resident set of this process in MB (`maxRSS` is in kilobytes). */
export const peakRssMb = (): number => process.resourceUsage().maxRSS / 1024

/** The `q` quantile (0..1) of `values` by nearest rank; `null` when empty. */
export const quantile = (values: ReadonlyArray<number>, q: number): number | null => {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]!
}

/** One workload's figures for one system, as the `--json` line carries them. */
export interface Figures {
  readonly perS: number | null
  readonly p50Ms: number | null
  readonly p99Ms: number | null
  readonly cpuMsPerJob: number | null
  readonly rssMb: number | null
}

export const round = (value: number, digits = 1): number => {
  const f = 10 ** digits
  return Math.round(value * f) / f
}

/** Send a message to the parent over the IPC channel; resolves once it is handed to the channel. */
export const send = (message: FromWorker): Promise<void> =>
  new Promise((resolve) => {
    if (process.send === undefined) return resolve()
    process.send(message, undefined, undefined, () => resolve())
  })

/** The next message of `type` from the parent. */
export const receive = (type: ToWorker["type"]): Promise<void> =>
  new Promise((resolve) => {
    const on = (message: ToWorker) => {
      if (message.type !== type) return
      process.off("message", on)
      resolve()
    }
    process.on("message", on)
  })

/**
 * One system under test. The parent calls `prepare` (a fresh schema or file), `enqueue` (W1/W3:
 * `n` no-op jobs with indices 0..n-1; answers each job's availability time, by index),
 * `completed` (how many of them are durably done, from the system's own tables) and `verify`
 * (executions beyond one per job, from the system's own bookkeeping; `undefined` when it keeps
 * none), then `drop`. A worker process calls `work` (serve no-op jobs from `go` until `stop`,
 * recording each handler start) or `workflows` (W2: start `count` three-step workflows, at most
 * `concurrency` at once, and await each).
 */
export interface System {
  readonly prepare: (url: string) => Promise<Target>
  readonly enqueue: (target: Target, n: number) => Promise<ReadonlyArray<number>>
  readonly completed: (target: Target) => Promise<number>
  readonly verify: (target: Target) => Promise<number | undefined>
  readonly drop: (target: Target) => Promise<void>
  readonly close: () => Promise<void>
}

/** The worker side of a system: open (before `ready`), serve from `go`, close at `stop`. */
export interface WorkerSide {
  readonly open: (target: Target, recorder: Recorder) => Promise<{ readonly begin: () => Promise<void>; readonly end: () => Promise<void> }>
  readonly workflows?: (
    target: Target,
    recorder: Recorder,
    options: { readonly count: number; readonly concurrency: number }
  ) => Promise<WorkerReport>
}

/** A schema name no one else uses: `<prefix>_<pid>_<random hex>`. */
export const freshSchema = (prefix: string): string =>
  `${prefix}_${process.pid}_${Math.floor(Math.random() * 0xffffffff).toString(16)}`

/** Run `tasks` with at most `limit` in flight; answers their results in order. */
export const pooled = async <A>(count: number, limit: number, task: (index: number) => Promise<A>): Promise<Array<A>> => {
  const results: Array<A> = new Array(count)
  let next = 0
  const lane = async () => {
    while (next < count) {
      const index = next++
      results[index] = await task(index)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, count) }, lane))
  return results
}
