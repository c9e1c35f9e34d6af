/**
 * node.md check 29 with check 16 at the runtime level [pg]: two `layerPg` worker processes on one
 * fresh schema; SIGTERM to the owner mid-step releases the run (`baton.run.released { reason:
 * "shutdown" }`, the in-flight attempt `interrupted` with its checkpoint) and the other worker
 * resumes that step from the checkpoint and finishes the run, every step's row once. With a
 * single worker the released run waits, accepted and unowned, for the worker's restart. The
 * scenario is runtime-shutdown-scenario.ts, shared with the SQLite twin.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { afterAll, describe, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import * as crypto from "node:crypto"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { appSet, flows } from "./fixtures/runtimeFlows.js"
import { startWorker, stopAll, tempDb, type Worker } from "./fixtures/runtimeProcesses.js"
import * as Shutdown from "./runtime-shutdown-scenario.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("node runtime SIGTERM on PostgreSQL (checks 16, 29)")

const workers: Array<Worker> = []
afterAll(() => stopAll(workers))

/** A client and workers on a fresh schema, dropped afterwards. */
const onPostgres = async (scenario: (backend: Shutdown.Backend) => Promise<void>) => {
  const schema = `node_${crypto.randomBytes(12).toString("hex")}`
  const db = tempDb()
  const client = ManagedRuntime.make(
    NodeRuntime.layerPg({ url: url!, schema, mode: "client", hostId: "pg-client", flows, migrations: [appSet] })
  )
  const env = { BATON_TEST_LOG: db.log, BATON_TEST_WORKER_PG_URL: url!, BATON_TEST_WORKER_PG_SCHEMA: schema }
  const start = (label: string) => {
    const worker = startWorker("unused", label, env)
    workers.push(worker)
    return worker
  }
  try {
    // The client migrates the schema first, so the workers do not race on a new schema.
    await client.runPromise(Effect.void)
    await scenario({ client, log: db.log, start })
  } finally {
    await PgSchema.dropAndDispose(client, schema)
  }
}

describe.skipIf(url === undefined)("runtime on PostgreSQL: SIGTERM of the owner", () => {
  it("the run is released with the interrupted attempt's checkpoint and the other worker finishes it", () =>
    onPostgres(Shutdown.releasedToTheOtherWorker), 120_000)

  it("with a single worker the released run waits, accepted and unowned, for the next start", () =>
    onPostgres((backend) => Shutdown.releasedUntilRestart(backend, { count: 3, stepMs: 3000, chunks: 6 })), 120_000)
})
