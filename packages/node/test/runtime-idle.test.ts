/**
 * What an idle host's sweep costs, counted at the driver (scripts/lib/StatementCounter.ts): one
 * statement per tick (the host probe) while there is no work, and the sweep still reads what a probe
 * reports (a released run is found and driven by the next tick).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Counter from "../../../scripts/lib/StatementCounter.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { hold } from "./fixtures/queueFlows.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"
import { awaitStatus, launch } from "./fixtures/runtimeSupport.js"

Counter.installSqlite()

describe("an idle host", () => {
  it.scopedLive("sends one statement per sweep tick while there is no work, and still finds new work", () =>
    Effect.gen(function*() {
      const db = tempDb()
      // Ticks only when asked: the poller's next tick is 10 s away.
      const host = yield* Layer.build(NodeRuntime.layer({ filename: db.filename, flows: [hold], pollInterval: "10 seconds" }))
      const node = yield* Effect.provide(NodeRuntime.NodeHost, host)
      yield* node.sweepNow
      const before = Counter.snapshot()
      for (let i = 0; i < 10; i++) yield* node.sweepNow
      expect(Counter.diff(before, Counter.snapshot())).toMatchObject({ statements: 10, transactions: 0 })
      const client = yield* Layer.build(NodeRuntime.layer({ filename: db.filename, flows: [hold], mode: "client" }))
      const runId = yield* launch("queue-test.hold", { ms: 1 }).pipe(Effect.provide(client))
      yield* node.sweepNow
      yield* awaitStatus(runId, ["completed"], "5 seconds").pipe(Effect.provide(client))
    }))
})
