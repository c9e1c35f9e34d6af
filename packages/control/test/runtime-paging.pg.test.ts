/**
 * Commit-ordered paging on PostgreSQL with two hosts (two pools on one schema) (§19 check 46, PG half):
 * a write held open keeps later numbers behind it, so a walk whose first page was read in between
 * still returns both rows.
 */
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as RunStore from "@baton/run-store/RunStore"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import * as ControlRuntime from "../src/ControlRuntime.js"
import * as SqlControlRuntime from "../src/SqlControlRuntime.js"
import { launchF } from "./fixtures/runtimeContract.js"
import { unreadablePlanListing } from "./fixtures/unreadablePlan.js"
import { defaultFlows, pgDatabase } from "./fixtures/runtimeSupport.js"
import { type Host, hostOf } from "./fixtures/sqlHost.js"

const url = TestDatabase.postgresTestUrl("control runtime paging")


/**
 * Run `first` inside a write held open 300 ms after its work, and start `second` on the other host once
 * `first`'s work is done but not committed (a latch, not a guess at timing).
 */
const heldRace = <A, B>(h1: Host, first: Effect.Effect<A, unknown>, key1: string | undefined, second: Effect.Effect<B, unknown>) =>
  Effect.gen(function*() {
    const worked = yield* Deferred.make<void>()
    const body = first.pipe(Effect.zipLeft(Deferred.succeed(worked, undefined)), Effect.zipLeft(Effect.sleep("300 millis")))
    const one = yield* Effect.fork(h1.writer.write(body, key1 === undefined ? {} : { key: key1 }))
    yield* Deferred.await(worked)
    yield* Effect.sleep("50 millis")
    const two = yield* Effect.fork(second)
    return [yield* Fiber.join(one), two] as const
  })

describe.skipIf(url === undefined)("SqlControlRuntime paging on PostgreSQL", () => {
  it.scopedLive("46: later commits get later numbers: runs, plans, signals and steers", () =>
    Effect.gen(function*() {
      const h1 = yield* hostOf
      const schema = (yield* h1.sql<{ s: string }>`SELECT current_schema() AS s`)[0]!.s
      const second = Layer.provideMerge(RunStore.layer, PgDatabase.layer({ url: url!, schema }))
      // Built in the test's scope so the second pool stays open for the whole test.
      const context2 = yield* Layer.build(Layer.orDie(second))
      const h2 = yield* hostOf.pipe(Effect.provide(context2))
      const on = (host: Host) => Effect.provideService(ControlRuntime.ControlRuntime, host.rt)
      yield* launchF({ first: 1 }).pipe(on(h1))
      const store1 = yield* RunStore.RunStore
      const store2 = yield* RunStore.RunStore.pipe(Effect.provide(context2))
      const summary = (runId: string) => JSON.stringify({ flowName: "E", x: runId })

      // Runs: host 1 holds its create open; the list walk reads page 1 in between.
      const page1 = yield* h1.rt.queryRuns({ limit: 1 })
      const [, runTwo] = yield* heldRace(h1, store1.create("a", summary("a")), "a", store2.create("b", summary("b")))
      yield* Fiber.join(runTwo)
      const rest = yield* h1.rt.queryRuns({ limit: 10, cursor: page1.nextCursor ?? { rowSeq: 1, runId: "run-1" } })
      expect(rest.items.map((r) => r.runId)).toEqual(["a", "b"])
      const seqs = yield* h1.sql<{ run_id: string; row_seq: number }>`SELECT run_id, row_seq FROM flows_runs WHERE run_id IN ('a', 'b') ORDER BY row_seq`
      expect(seqs.map((r) => r.run_id)).toEqual(["a", "b"])

      // Plans: control_plans.row_seq follows the commit order too.
      const plans1 = yield* h1.rt.pagePlanIds({ limit: 1 })
      const [planA, planTwo] = yield* heldRace(h1, h1.rt.plan({ flowId: "F", input: { p: "a" } }), undefined, h2.rt.plan({ flowId: "F", input: { p: "b" } }))
      const planB = yield* Fiber.join(planTwo)
      const planRest = yield* h1.rt.pagePlanIds({ limit: 10, after: plans1.through })
      expect(planRest.ids).toEqual([planA.card.planId, planB.card.planId])

      // Signal commands and steers: sequence numbers in commit order.
      yield* launchF({ second: 1 }).pipe(on(h1))
      const [, signalTwo] = yield* heldRace(
        h1, h1.rt.admitSignal("s-a", "run-1", { name: "go", payload: 1 }), "run-1",
        h2.rt.admitSignal("s-b", "run-2", { name: "go", payload: 2 })
      )
      yield* Fiber.join(signalTwo)
      expect((yield* h1.rt.signalCommands({ name: "go" })).map((c) => c.commandId)).toEqual(["s-a", "s-b"])
      const principal = yield* h1.rt.stampPrincipal()
      const message = (runId: string, messageId: string) => ({ messageId, runId, principal, createdAt: 0, body: messageId })
      const [steerA, steerTwo] = yield* heldRace(
        h1, h1.rt.appendSteer("run-1", message("run-1", "m-a")), "run-1",
        h2.rt.appendSteer("run-2", message("run-2", "m-b"))
      )
      expect(yield* Fiber.join(steerTwo)).toBeGreaterThan(steerA)
    }).pipe(Effect.provide(Layer.orDie(Layer.provideMerge(RunStore.layer, pgDatabase(url!))))), 120_000)

  it.scopedLive("a plan whose stored card does not decode is listed in place flagged readable: false, never failing the page", () =>
    Effect.gen(function*() {
      const rt = yield* SqlControlRuntime.make({ flows: defaultFlows })
      yield* Effect.provideService(unreadablePlanListing, ControlRuntime.ControlRuntime, rt)
    }).pipe(Effect.provide(Layer.orDie(Layer.provideMerge(RunStore.layer, pgDatabase(url!))))), 120_000)
})
