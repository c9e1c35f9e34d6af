/**
 * Control's numbers on PostgreSQL: sequences that continue after an older database's counters, writes of
 * different runs that never wait on each other, and cross-run pages that never pass a write in flight.
 * Two hosts are two pools on one schema; a write is held open by a latch, never by a guess at timing.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as RunStoreMigrations from "@baton/run-store/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import * as ControlRuntime from "../src/ControlRuntime.js"
import * as SqlControlRuntime from "../src/SqlControlRuntime.js"
import { approvePlan, launchF } from "./fixtures/runtimeContract.js"
import { defaultFlows, pgDatabase } from "./fixtures/runtimeSupport.js"
import { type Host, hostOf } from "./fixtures/sqlHost.js"
import { before0003, counters, suite } from "./fixtures/sqlSequences.js"

const url = TestDatabase.postgresTestUrl("control sequences")


/** Host 1 on the test's schema and host 2 on a second pool over the same schema. */
const twoHosts = Effect.gen(function*() {
  const h1 = yield* hostOf
  const schema = (yield* h1.sql<{ s: string }>`SELECT current_schema() AS s`)[0]!.s
  // Built in the test's scope so the second pool stays open for the whole test.
  const context2 = yield* Layer.build(Layer.orDie(Layer.provideMerge(RunStore.layer, PgDatabase.layer({ url: url!, schema }))))
  const h2 = yield* hostOf.pipe(Effect.provide(context2))
  return { h1, h2 }
})

/**
 * Run `work` inside a write of host 1 keyed `key`, held open until `release` completes; answers once the
 * work is done (the transaction still open) with the fiber that commits it.
 */
const holdOpen = <A>(host: Host, key: string, work: Effect.Effect<A, unknown>, release: Deferred.Deferred<void>) =>
  Effect.gen(function*() {
    const worked = yield* Deferred.make<A>()
    const fiber = yield* Effect.fork(host.writer.write(
      Effect.tap(work, (a) => Deferred.succeed(worked, a)).pipe(Effect.zipLeft(Deferred.await(release))),
      { key }
    ))
    // A work that fails ends the fiber before the latch: surface its failure instead of waiting.
    const value = yield* Effect.raceFirst(
      Deferred.await(worked),
      Effect.flatMap(Fiber.join(fiber), () => Effect.dieMessage("the held write ended before its work was done"))
    )
    return { value, fiber }
  })

/**
 * Give `body` the latch its held write waits for, opened however `body` ends: inside the layer's scope,
 * whose schema drop would otherwise wait for the held transaction.
 */
const releasing = <A, E, R>(body: (release: Deferred.Deferred<void>) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(Deferred.make<void>(), (release) => Effect.ensuring(body(release), Deferred.succeed(release, undefined)))

const on = (host: Host) => Effect.provideService(ControlRuntime.ControlRuntime, host.rt)

/** Fails when `effect` waits 15 s (it would be waiting on the held write); the wait itself goes on detached. */
const within = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.timeoutFail(Effect.disconnect(effect), { duration: "15 seconds", onTimeout: () => new Error("waited on the held write") })

const steer = (rt: ControlRuntime.Service, runId: string, messageId: string) =>
  Effect.flatMap(rt.stampPrincipal({ id: "p", kind: "operator" }), (principal) =>
    rt.appendSteer(runId, { messageId, runId, principal, createdAt: 0, body: messageId }))

describe.skipIf(url === undefined)("control numbers on PostgreSQL", () => {
  suite(() => TestDatabase.layerPostgres(url!))

  it.scopedLive("signals, steers, resumes and launches of different runs commit while another run's write is open", () =>
    releasing((release) => Effect.gen(function*() {
      const { h1, h2 } = yield* twoHosts
      yield* launchF({ n: 1 }).pipe(on(h1))
      yield* launchF({ n: 2 }).pipe(on(h1))
      const { card } = yield* Effect.flatMap(h1.rt.plan({ flowId: "F", input: { n: 3 } }), (outcome) =>
        Effect.as(approvePlan(outcome.card).pipe(on(h1)), outcome))
      const { card: card2 } = yield* Effect.flatMap(h1.rt.plan({ flowId: "F", input: { n: 4 } }), (outcome) =>
        Effect.as(approvePlan(outcome.card).pipe(on(h1)), outcome))

      const held = yield* holdOpen(h1, "run-1", Effect.all([
        h1.rt.admitSignal("s-1", "run-1", { name: "go", payload: 1 }),
        steer(h1.rt, "run-1", "m-1"),
        h1.rt.requestResume("run-1"),
        h1.rt.launch(card.planId, card.digest, card.envelope),
        Effect.map(h1.sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`, (rows) => rows[0]!.pid)
      ]), release)
      const heldPid = held.value[4]
      // Each of these would wait for host 1's commit if they shared a row (or a schema-wide lock) with it.
      const second = yield* Effect.fork(within(Effect.all([
        h2.rt.admitSignal("s-2", "run-2", { name: "go", payload: 2 }),
        steer(h2.rt, "run-2", "m-2"),
        h2.rt.requestResume("run-2"),
        h2.rt.launch(card2.planId, card2.digest, card2.envelope)
      ])))
      // Sampled while host 2 works: sessions waiting for a lock host 1's open transaction holds.
      let blocked = 0
      while (blocked === 0 && Option.isNone(yield* Fiber.poll(second))) {
        const [row] = yield* h1.sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM pg_stat_activity
          WHERE ${heldPid} = ANY(pg_blocking_pids(pid))`
        blocked = Math.max(blocked, Number(row!.n))
        yield* Effect.sleep("2 millis")
      }
      expect(blocked).toBe(0)
      const [, steered, resumed, launched] = yield* Fiber.join(second)
      // Committed while host 1's transaction is still open.
      expect(Option.isNone(yield* Fiber.poll(held.fiber))).toBe(true)
      const seen = yield* h2.sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM control_signal_commands WHERE command_id = 's-2'`
      expect(Number(seen[0]!.n)).toBe(1)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(held.fiber)

      const [, steerOne, resumeOne, launchOne] = held.value
      // Numbers come in the order taken: host 1 took its numbers first.
      expect(steered).toBeGreaterThan(steerOne)
      expect(resumed).toBeGreaterThan(resumeOne)
      expect(launchOne._tag === "Started" && launchOne.run.runId).toBe("run-3")
      expect(launched._tag === "Started" && launched.run.runId).toBe("run-4")
      expect(yield* counters.pipe(Effect.provideService(SqlClient.SqlClient, h1.sql))).toEqual({})
    })).pipe(Effect.provide(Layer.orDie(Layer.provideMerge(RunStore.layer, pgDatabase(url!))))), 120_000)

  it.scopedLive("a pending-signal reader does not pass a signal whose admit is still open", () =>
    releasing((release) => Effect.gen(function*() {
      const { h1, h2 } = yield* twoHosts
      yield* launchF({ n: 1 }).pipe(on(h1))
      yield* launchF({ n: 2 }).pipe(on(h1))
      // A fresh runtime, so its pending-signal cursor starts at the beginning.
      const reader = yield* SqlControlRuntime.make({ flows: defaultFlows }).pipe(
        Effect.provideService(SqlClient.SqlClient, h2.sql),
        Effect.provideService(DurableWriter.DurableWriter, h2.writer)
      )
      const held = yield* holdOpen(h1, "run-1", h1.rt.admitSignal("early", "run-1", { name: "go", payload: 1 }), release)
      // A higher number commits first.
      yield* within(h2.rt.admitSignal("later", "run-2", { name: "go", payload: 2 }))
      const reading = yield* Effect.fork(reader.pendingSignals)
      yield* Effect.sleep("300 millis")
      // The reader waits for the admit in flight rather than answering "later" alone and moving past it.
      expect(Option.isNone(yield* Fiber.poll(reading))).toBe(true)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(held.fiber)
      expect((yield* Fiber.join(reading)).map((c) => c.commandId)).toEqual(["early", "later"])
    })).pipe(Effect.provide(Layer.orDie(Layer.provideMerge(RunStore.layer, pgDatabase(url!))))), 120_000)

  it.scopedLive("plan pages do not pass a plan whose write is still open", () =>
    releasing((release) => Effect.gen(function*() {
      const { h1, h2 } = yield* twoHosts
      // Keyed writes around the plans, so neither holds the schema lock exclusively and the second
      // plan, with the higher number, commits first.
      const held = yield* holdOpen(h1, "planner-1", h1.rt.plan({ flowId: "F", input: { p: "a" } }), release)
      const later = yield* within(h2.writer.write(h2.rt.plan({ flowId: "F", input: { p: "b" } }), { key: "planner-2" }))
      const paging = yield* Effect.fork(h2.rt.pagePlanIds({ limit: 10 }))
      const querying = yield* Effect.fork(h2.rt.queryPlans({ limit: 10 }))
      yield* Effect.sleep("300 millis")
      expect([Option.isNone(yield* Fiber.poll(paging)), Option.isNone(yield* Fiber.poll(querying))]).toEqual([true, true])
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(held.fiber)
      const ids = [held.value.card.planId, later.card.planId]
      expect((yield* Fiber.join(paging)).ids).toEqual(ids)
      expect((yield* Fiber.join(querying)).plans.map((p) => "card" in p ? p.card.planId : p.planId)).toEqual(ids)
    })).pipe(Effect.provide(Layer.orDie(Layer.provideMerge(RunStore.layer, pgDatabase(url!))))), 120_000)

  it.scopedLive("a read-only reader of a database without the sequences pages plans and pending signals as before", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* DatabaseMigrations.run([JournalMigrations.set, RunStoreMigrations.set, before0003])
      yield* sql`INSERT INTO control_plans (plan_id, row_seq, card_json, decoded_input_json, decision)
        VALUES ('plan-1', 1, '{}', 'null', 'pending'), ('plan-2', 2, '{}', 'null', 'pending')`
      yield* sql`INSERT INTO control_signal_commands (seq, command_id, run_id, payload_json, state)
        VALUES (1, 'old', 'gone', '{"name":"go","payload":0}', 'pending')`
      const schema = (yield* sql<{ s: string }>`SELECT current_schema() AS s`)[0]!.s
      const readOnly = yield* Layer.build(Layer.orDie(Layer.provideMerge(RunStore.layer, PgDatabase.layer({ url: url!, schema, readOnly: true }))))
      const reader = yield* SqlControlRuntime.make({ flows: defaultFlows }).pipe(Effect.provide(readOnly))
      expect(yield* reader.pagePlanIds({ limit: 10 })).toEqual({ ids: ["plan-1", "plan-2"], through: 2 })
      expect((yield* reader.queryPlans({ limit: 10 })).plans.map((p) => "card" in p ? p.card.planId : p.planId)).toEqual(["plan-1", "plan-2"])
      expect((yield* reader.pendingSignals).map((c) => c.commandId)).toEqual(["old"])
    }).pipe(Effect.provide(Layer.provideMerge(RunStore.layer, Layer.orDie(TestDatabase.layerPostgres(url!))))), 120_000)
})
