/**
 * DBOS Transact as a queue bench system, its system database in its own schema. W1/W3: workflow
 * `noop` on queue `noop` (worker concurrency 16, polled every 100 ms instead of the default 1 s),
 * enqueued by a `DBOSClient` in one transaction (`enqueueInTransaction`). W2: workflow
 * `three-steps` (three `DBOS.runStep`s) started in the worker process with `DBOS.startWorkflow` and
 * awaited with `getResult`.
 */
import { DBOS, DBOSClient } from "@dbos-inc/dbos-sdk"
import pg from "pg"
import { type Recorder, type System, type Target, type WorkerReport, type WorkerSide, cpuMsSince, freshSchema, nowMs, peakRssMb, perWorkerConcurrency, pooled } from "./common.js"
import { dropSchema, scalar } from "./pg.js"

const applicationName = "baton-bench"
const applicationVersion = "bench-1"
const queue = "noop"

let client: DBOSClient | undefined

export const system: System = {
  // The workers' `DBOS.launch` creates the tables (the first worker is ready before the next starts).
  prepare: async (url) => ({ url, schema: freshSchema("bench_dbos") }),
  enqueue: async (target, n) => {
    client ??= await DBOSClient.create({ systemDatabaseUrl: target.url, systemDatabaseSchemaName: target.schema, applicationName })
    const connection = new pg.Client({ connectionString: target.url })
    await connection.connect()
    try {
      await connection.query("BEGIN")
      for (let i = 0; i < n; i++) {
        await client.enqueueInTransaction(connection, { queueName: queue, workflowName: "noop", appVersion: applicationVersion }, i)
      }
      await connection.query("COMMIT")
    } finally {
      await connection.end()
    }
    const at = nowMs()
    return Array.from({ length: n }, () => at)
  },
  completed: (target) =>
    scalar(target.url, `SELECT count(*) FROM "${target.schema}".workflow_status WHERE queue_name = $1 AND status = 'SUCCESS'`, [queue]),
  // Every dequeue of a workflow adds one to its recovery_attempts.
  verify: (target) =>
    scalar(target.url, `SELECT count(*) FROM "${target.schema}".workflow_status WHERE queue_name = $1 AND recovery_attempts > 1`, [queue]),
  drop: async (target) => {
    await client?.destroy()
    client = undefined
    await dropSchema(target.url, target.schema)
  },
  close: async () => {}
}

const configure = (target: Target) =>
  DBOS.setConfig({
    name: applicationName,
    applicationVersion,
    systemDatabaseUrl: target.url,
    systemDatabaseSchemaName: target.schema,
    systemDatabasePoolSize: 10,
    logLevel: "error"
  })

export const worker: WorkerSide = {
  open: async (target: Target, recorder: Recorder) => {
    DBOS.registerWorkflow(async (i: number) => {
      recorder.started(i)
    }, { name: "noop" })
    configure(target)
    await DBOS.launch()
    // Queue settings live in the system database; the queue runner picks them up on its next
    // reconcile (every 1 s), so wait that long before saying ready.
    await DBOS.registerQueue(queue, { workerConcurrency: perWorkerConcurrency, minPollingIntervalMs: 100 })
    await new Promise((resolve) => setTimeout(resolve, 1200))
    return { begin: async () => {}, end: () => DBOS.shutdown() }
  },
  workflows: async (target: Target, recorder: Recorder, options): Promise<WorkerReport> => {
    const threeSteps = DBOS.registerWorkflow(async (i: number) => {
      recorder.started(i)
      const a = await DBOS.runStep(async () => i + 1, { name: "one" })
      const b = await DBOS.runStep(async () => a * 2, { name: "two" })
      return await DBOS.runStep(async () => b - 1, { name: "three" })
    }, { name: "three-steps" })
    configure(target)
    await DBOS.launch()
    const availableAt: Array<number> = new Array(options.count)
    const cpu = process.cpuUsage()
    const t0Ms = nowMs()
    await pooled(options.count, options.concurrency, async (i) => {
      availableAt[i] = nowMs()
      const handle = await DBOS.startWorkflow(threeSteps)(i)
      const result = await handle.getResult()
      if (result !== (i + 1) * 2 - 1) throw new Error(`three-steps ${i} answered ${result}`)
    })
    const t1Ms = nowMs()
    const cpuMs = cpuMsSince(cpu)
    await DBOS.shutdown()
    return { starts: recorder.starts, cpuMs, rssMb: peakRssMb(), t0Ms, t1Ms, availableAt }
  }
}
