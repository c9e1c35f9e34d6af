/**
 * graphile-worker (0.17, the last line that runs on Node 20) as a queue bench system: task `noop` in its
 * own schema; `addJobs` enqueues the jobs in one statement; a worker is one runner with concurrency 16
 * (LISTEN/NOTIFY plus its default polling, no local batching).
 */
import { type Logger, Logger as GraphileLogger, makeWorkerUtils, run, type WorkerUtils } from "graphile-worker"
import { type Recorder, type System, type Target, type WorkerSide, freshSchema, nowMs, perWorkerConcurrency } from "./common.js"
import { dropSchema, scalar } from "./pg.js"

// Errors only: its per-job info lines would be the bench's own overhead.
const logger: Logger = new GraphileLogger(() => (level, message) => {
  if (level === "error") process.stderr.write(`graphile-worker: ${message}\n`)
})

let utils: WorkerUtils | undefined
let enqueued = 0

export const system: System = {
  prepare: async (url) => {
    const target = { url, schema: freshSchema("bench_graphile") }
    utils = await makeWorkerUtils({ connectionString: url, schema: target.schema, logger })
    await utils.migrate()
    return target
  },
  enqueue: async (_target, n) => {
    await utils!.addJobs(Array.from({ length: n }, (_, i) => ({ identifier: "noop", payload: { i } })))
    enqueued = n
    const at = nowMs()
    return Array.from({ length: n }, () => at)
  },
  // A completed job is deleted; what is left is queued, running or failed.
  completed: async (target) => enqueued - await scalar(target.url, `SELECT count(*) FROM "${target.schema}"._private_jobs`),
  // graphile-worker keeps no record of a completed job's executions: the handlers' own count decides.
  verify: async () => undefined,
  drop: async (target) => {
    await utils?.release()
    utils = undefined
    await dropSchema(target.url, target.schema)
  },
  close: async () => {}
}

export const worker: WorkerSide = {
  open: async (target: Target, recorder: Recorder) => {
    let runner: Awaited<ReturnType<typeof run>> | undefined
    return {
      begin: async () => {
        runner = await run({
          connectionString: target.url,
          schema: target.schema,
          concurrency: perWorkerConcurrency,
          noHandleSignals: true,
          logger,
          taskList: {
            noop: async (payload) => {
              recorder.started((payload as { i: number }).i)
            }
          }
        })
      },
      end: async () => {
        await runner?.stop()
      }
    }
  }
}
