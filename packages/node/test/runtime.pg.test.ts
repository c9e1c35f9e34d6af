/**
 * NodeRuntime.layerPg (node.md 4.7, checks 13 and 29 in part): hosts on one PostgreSQL schema
 * read lease time from the database clock, drive runs, and hand a released run to another host.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as Journal from "@baton/journal/Journal"
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Effect, Layer, ManagedRuntime, Schema } from "effect"
import * as crypto from "node:crypto"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as PgSchema from "./support/pgSchema.js"
import * as Step from "../src/Step.js"
import type * as OwnerId from "@baton/journal/OwnerId"
import { appSet, flows } from "./fixtures/runtimeFlows.js"
import { startWorker, stopAll, waitFor, type Worker } from "./fixtures/runtimeProcesses.js"
import { awaitStatus, expectCompleted, launch } from "./fixtures/runtimeSupport.js"

const url = TestDatabase.postgresTestUrl("node runtime (layerPg)")

const twoSteps = Flow.make({
  id: "pg.two",
  description: "two steps with a pause between",
  version: "1",
  input: Schema.Struct({ ms: Schema.Number }),
  handler: ({ ms }) =>
    Effect.gen(function*() {
      const a = yield* Step.run("a", Effect.as(Effect.sleep(ms), 1))
      const b = yield* Step.run("b", Effect.succeed(a + 1))
      return { b }
    })
})

const inContext = <R>(context: Context.Context<R>) => <A, E>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, context)

describe.skipIf(url === undefined)("NodeRuntime.layerPg", () => {
  it.scopedLive("hosts with the database clock drive a run; a run released at shutdown is taken up by another host", () =>
    Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      const options = { url: url!, schema, flows: [twoSteps], pollInterval: "100 millis" } as const
      const client = yield* Layer.build(NodeRuntime.layerPg({ ...options, mode: "client", hostId: "pg-client" }))
      const quick = yield* launch("pg.two", { ms: 10 }).pipe(inContext(client))
      const slow = yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(NodeRuntime.layerPg({ ...options, hostId: "pg-a", drainTimeout: "100 millis" }))
        yield* expectCompleted(quick).pipe(inContext(client))
        const runId = yield* launch("pg.two", { ms: 60_000 }).pipe(inContext(client))
        yield* awaitStatus(runId, ["running"]).pipe(inContext(client))
        return runId
      }))
      // pg-a shut down: the run was released, accepted and unowned.
      const released = yield* Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(slow)).pipe(inContext(client))
      expect(released.status).toBe("accepted")
      expect(released.ownerId).toBeUndefined()
      const journal = yield* Effect.flatMap(Journal.Journal, (j) => j.entries({ runId: slow as never, limit: 100 })).pipe(
        inContext(client)
      )
      expect(journal.entries.find((e) => e.eventType === "baton.run.released")?.payload).toMatchObject({ reason: "shutdown" })
      yield* Layer.build(NodeRuntime.layerPg({ ...options, hostId: "pg-b" }))
      // The step in flight was interrupted; pg-b runs it again (60 s body), so only check it owns the run.
      const owned = yield* awaitStatus(slow, ["running"]).pipe(inContext(client))
      expect(JSON.parse(owned.ownerId!).hostId).toBe("pg-b")
    }), 120_000)
})

const live = Clock.make()
/** A host wall clock 40 s fast; monotonic time and timers stay the live clock's. */
const fast: Clock.Clock = {
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => live.unsafeCurrentTimeMillis() + 40_000,
  currentTimeMillis: Effect.sync(() => live.unsafeCurrentTimeMillis() + 40_000),
  unsafeCurrentTimeNanos: () => live.unsafeCurrentTimeNanos(),
  currentTimeNanos: live.currentTimeNanos,
  sleep: (duration) => live.sleep(duration)
}

const workers: Array<Worker> = []
afterAll(() => stopAll(workers))

describe.skipIf(url === undefined)("NodeRuntime.layerPg with a wrong host clock (B-008)", () => {
  it("a host 40 s fast steals no live run and takes a killed owner's run once its lease is stale", async () => {
    const schema = `node_${crypto.randomBytes(12).toString("hex")}`
    const options = { url: url!, schema, flows, migrations: [appSet] }
    const client = ManagedRuntime.make(NodeRuntime.layerPg({ ...options, mode: "client", hostId: "pg-client" }))
    try {
      const a = startWorker("unused", "a", {
        BATON_TEST_WORKER_PG_URL: url!,
        BATON_TEST_WORKER_PG_SCHEMA: schema,
        BATON_TEST_HOST_ID: "pg-host-a"
      })
      workers.push(a)
      await a.ready
      const getRun = (runId: string) =>
        client.runPromise(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
      const runId = await client.runPromise(launch("runtime-test.steps", { count: 4, stepMs: 2000, chunks: 4 }))
      const hostOf = async () => {
        const summary = await getRun(runId)
        return summary.ownerId === undefined ? undefined : (JSON.parse(summary.ownerId) as OwnerId.OwnerId).hostId
      }
      await waitFor("a owns the run", async () => ((await hostOf()) === "pg-host-a" ? true : undefined), 60_000)
      const b = ManagedRuntime.make(
        NodeRuntime.layerPg({ ...options, hostId: "pg-host-b", pollInterval: "200 millis" }).pipe(
          Layer.provide(Layer.setClock(fast))
        )
      )
      try {
        // B's readings follow the database, not its wall clock.
        const reading = await b.runPromise(Effect.flatMap(NodeRuntime.NodeHost, () => Clock.currentTimeMillis))
        expect(Math.abs(reading - Date.now())).toBeLessThan(10_000)
        for (let i = 0; i < 5; i++) await b.runPromise(Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow))
        expect(await hostOf()).toBe("pg-host-a")
        a.child.kill("SIGKILL")
        await a.exited
        await waitFor("b owns the run", async () => ((await hostOf()) === "pg-host-b" ? true : undefined), 90_000)
        const done = await waitFor("completion", async () => {
          const s = await getRun(runId)
          return s.status === "completed" || s.status === "failed" ? s : undefined
        }, 60_000)
        expect(done.status).toBe("completed")
      } finally {
        await b.dispose()
      }
    } finally {
      await client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)))
        .catch(() => undefined)
      await client.dispose()
    }
  }, 180_000)
})
