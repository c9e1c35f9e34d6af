/**
 * pg-boss (10.x, the last line that runs on Node 20) as a queue bench system: queue `noop` in its own
 * schema; `insert` enqueues the jobs in one statement; a worker is one `work` subscription fetching
 * batches of 100 at the minimum polling interval (0.5 s), the library's throughput knobs.
 */
import PgBoss from "pg-boss"
import { type Recorder, type System, type Target, type WorkerSide, freshSchema, nowMs } from "./common.js"
import { dropSchema, scalar } from "./pg.js"

const queue = "noop"
const batchSize = 100

const quietBoss = (target: Target, max: number) => {
  const boss = new PgBoss({ connectionString: target.url, schema: target.schema, max, supervise: false, schedule: false })
  // A stopped subscription may report a cancelled fetch; the bench checks completions itself.
  boss.on("error", (error) => process.stderr.write(`pg-boss: ${error.message}\n`))
  return boss
}

let parentBoss: PgBoss | undefined

export const system: System = {
  prepare: async (url) => {
    const target = { url, schema: freshSchema("bench_pgboss") }
    parentBoss = quietBoss(target, 2)
    await parentBoss.start()
    await parentBoss.createQueue(queue)
    return target
  },
  enqueue: async (_target, n) => {
    await parentBoss!.insert(Array.from({ length: n }, (_, i) => ({ name: queue, data: { i } })))
    const at = nowMs()
    return Array.from({ length: n }, () => at)
  },
  completed: (target) => scalar(target.url, `SELECT count(*) FROM "${target.schema}".job WHERE name = $1 AND state = 'completed'`, [queue]),
  // pg-boss counts a job's retries; a job that ran twice without failing leaves no trace here.
  verify: (target) => scalar(target.url, `SELECT count(*) FROM "${target.schema}".job WHERE name = $1 AND retry_count > 0`, [queue]),
  drop: async (target) => {
    await parentBoss?.stop({ graceful: false, wait: true })
    parentBoss = undefined
    await dropSchema(target.url, target.schema)
  },
  close: async () => {}
}

export const worker: WorkerSide = {
  open: async (target: Target, recorder: Recorder) => {
    const boss = quietBoss(target, 10)
    await boss.start()
    return {
      begin: async () => {
        await boss.work<{ i: number }>(queue, { batchSize, pollingIntervalSeconds: 0.5 }, async (jobs) => {
          for (const job of jobs) recorder.started(job.data.i)
        })
      },
      end: () => boss.stop({ graceful: true, wait: true, timeout: 5000 })
    }
  }
}
