/**
 * NodeRuntime.layerPg (node.md 4.7, checks 13 and 29 in part): hosts on one PostgreSQL schema
 * read lease time from the database clock, drive runs, and hand a released run to another host.
 */
import { describe, expect, it } from "@effect/vitest"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as Journal from "@baton/journal/Journal"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Schema } from "effect"
import * as crypto from "node:crypto"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Step from "../src/Step.js"
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
      const schema = `node_${crypto.randomBytes(12).toString("hex")}`
      yield* Effect.addFinalizer(() =>
        Effect.scoped(Effect.gen(function*() {
          const context = yield* Layer.build(PgDatabase.layer({ url: url!, schema }))
          const sql = Context.get(context, SqlClient.SqlClient)
          yield* sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
        })).pipe(Effect.ignore)
      )
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
