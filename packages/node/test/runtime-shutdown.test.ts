/**
 * SIGTERM to the owning worker mid-run (node.md check 16) on SQLite: the worker releases the run
 * within its shutdown bound (`baton.run.released { reason: "shutdown" }`, the in-flight attempt
 * `interrupted` with its checkpoint) and another worker, or the next start, finishes it. The
 * scenario is runtime-shutdown-scenario.ts, shared with the PostgreSQL twin.
 */
import { afterAll, describe, it } from "@effect/vitest"
import { ManagedRuntime } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { appSet, flows } from "./fixtures/runtimeFlows.js"
import { startWorker, stopAll, tempDb, type Worker } from "./fixtures/runtimeProcesses.js"
import * as Shutdown from "./runtime-shutdown-scenario.js"

const workers: Array<Worker> = []
afterAll(() => stopAll(workers))

/** A client and workers on a fresh SQLite file. */
const onSqlite = async (scenario: (backend: Shutdown.Backend) => Promise<void>) => {
  const db = tempDb()
  const client = ManagedRuntime.make(
    NodeRuntime.layer({ filename: db.filename, mode: "client", flows, migrations: [appSet] })
  )
  const start = (label: string) => {
    const worker = startWorker(db.filename, label, { BATON_TEST_LOG: db.log })
    workers.push(worker)
    return worker
  }
  try {
    await scenario({ client, log: db.log, start })
  } finally {
    await client.dispose()
  }
}

describe.concurrent("runtime: SIGTERM of the owner", () => {
  it("the run is released and the other worker finishes it", () => onSqlite(Shutdown.releasedToTheOtherWorker), 120_000)

  it("with a single worker the released run waits, accepted and unowned, for the next start", () =>
    onSqlite((backend) => Shutdown.releasedUntilRestart(backend, { count: 4, stepMs: 4000, chunks: 16 })), 120_000)
})
