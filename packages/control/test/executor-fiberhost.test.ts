/**
 * FiberHost as the facade's executor over the SQL runtime: launch, park on a
 * wait or an approval, re-drive on a signal or a decision, cancel.
 */
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as TestDatabase from "@baton/database/TestDatabase"
import type * as Journal from "@baton/journal/Journal"
import * as RunStore from "@baton/run-store/RunStore"
import { describe, expect, it } from "@effect/vitest"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { Deferred, Effect, Fiber, Ref, type Scope, TestClock } from "effect"
import * as Control from "../src/Control.js"
import * as ControlExecutor from "../src/ControlExecutor.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import type * as ControlSchema from "../src/ControlSchema.js"
import * as SqlControlRuntime from "../src/SqlControlRuntime.js"
import { envelope, flows } from "./fixtures/facadeFlows.js"
import { eventTypes } from "./fixtures/facadeLifecycle.js"
import { stores } from "./fixtures/facadeLayers.js"

type Env = Journal.Journal | RunStore.RunStore | SqlClient.SqlClient | DurableWriter.DurableWriter | Scope.Scope

const hostP = { hostId: "host-p", pid: 1, nonce: "boot" }
const hostQ = { hostId: "host-q", pid: 2, nonce: "boot" }

/** A runtime with its own identity, a FiberHost running `bodies`, and a facade over both. */
const hostWith = (
  owner: typeof hostP,
  bodies: Record<string, ControlExecutor.RunBody>,
  options: SqlControlRuntime.Options = {},
  custom?: ControlExecutor.Service
) =>
  Effect.gen(function*() {
    const runtime = yield* SqlControlRuntime.make({ flows, owner, ...options })
    const executor = custom ?? (yield* ControlExecutor.FiberHost.make({ flows: bodies }).pipe(
      Effect.provideService(ControlRuntime.ControlRuntime, runtime)
    ))
    const control = yield* Control.make.pipe(
      Effect.provideService(ControlRuntime.ControlRuntime, runtime),
      Effect.provideService(ControlExecutor.ControlExecutor, executor)
    )
    return { runtime, executor, control }
  })

/** Polls `read` (on real time, independent of the TestClock) until `done` holds. */
const eventually = <A, E, R>(read: Effect.Effect<A, E, R>, done: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2000; i++) {
      const value = yield* read
      if (done(value)) return value
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
    return yield* Effect.dieMessage("condition never held")
  })

const launch = (control: Control.Service, key: string) =>
  Effect.gen(function*() {
    const card = yield* control.plan({ flowId: "F", input: { a: key } })
    yield* control.approve(card.approval)
    const receipt = yield* control.run({
      _tag: "Plan",
      planId: card.planId,
      digest: card.digest,
      envelope: card.envelope,
      idempotencyKey: key
    })
    if (receipt._tag !== "Accepted" || receipt.runId === undefined) throw new Error(`launch answered ${receipt._tag}`)
    return receipt.runId
  })

const provide = <A, E>(body: Effect.Effect<A, E, Env>) =>
  body.pipe(Effect.scoped, Effect.provide(stores(TestDatabase.layer))) as Effect.Effect<A, E>

describe("ControlExecutor.FiberHost", () => {
  it.effect("[12] a launched body runs: the run reports running, then completed", () =>
    provide(Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const { control } = yield* hostWith(hostP, {
        F: () => Deferred.await(gate).pipe(Effect.as(42))
      })
      const runId = yield* launch(control, "r")
      expect((yield* control.getRun(runId)).status).toBe("running")
      yield* Deferred.succeed(gate, undefined)
      const done = yield* eventually(control.getRun(runId), (s) => s.status === "completed")
      expect(done.ownerId).toBeUndefined()
      expect(yield* eventTypes(runId)).toEqual(["control.run.accepted", "control.run.running"])
    })))

  it.effect("the runs one host drives renew their leases with one heartbeat statement per interval", () => {
    const statements: Array<string> = []
    const heartbeats = () => statements.filter((text) => /^\s*UPDATE flows_runs\b[\s\S]*?\bSET heartbeat_at_ms\b/.test(text)).length
    return provide(Statement.withTransformer(
      Effect.gen(function*() {
        const store = yield* RunStore.RunStore
        const gate = yield* Deferred.make<void>()
        const { control } = yield* hostWith(hostP, { F: () => Deferred.await(gate).pipe(Effect.as(1)) })
        const runIds = [yield* launch(control, "a"), yield* launch(control, "b"), yield* launch(control, "c")]
        const stamped = (atMs: number) =>
          Effect.map(Effect.forEach(runIds, (runId) => store.get(runId)), (rows) => rows.every((row) => row.heartbeatAtMs === atMs))
        const before = heartbeats()
        for (const second of [1, 2]) {
          yield* TestClock.adjust(1_000)
          yield* eventually(stamped(second * 1_000), (done) => done)
          expect(heartbeats() - before).toBe(second)
        }
        yield* Deferred.succeed(gate, undefined)
      }),
      (self) => {
        statements.push(self.compile()[0])
        return Effect.succeed(self)
      }
    ))
  })

  it.effect("a flow without a body fails LaunchFailed and the run is failed", () =>
    provide(Effect.gen(function*() {
      const { control } = yield* hostWith(hostP, {})
      const error = yield* launch(control, "r").pipe(Effect.flip)
      expect(error).toMatchObject({ _tag: "LaunchFailed", message: "no body registered for flow F" })
      const runId = (error as { readonly runId: string }).runId
      expect((yield* control.getRun(runId)).status).toBe("failed")
    })))

  it.effect("[37] a body parked on waitFor is re-driven by a signal and completes with its payload; a replay delivers nothing", () =>
    provide(Effect.gen(function*() {
      const seen = yield* Ref.make<ReadonlyArray<ControlSchema.Json>>([])
      const drives = yield* Ref.make(0)
      const { control, runtime } = yield* hostWith(hostP, {
        F: (ctx) =>
          Effect.gen(function*() {
            yield* Ref.update(drives, (n) => n + 1)
            const payload = yield* ctx.waitFor("go", { request: { q: 1 } })
            yield* Ref.update(seen, (all) => [...all, payload])
            return payload
          })
      })
      const runId = yield* launch(control, "r")
      const parked = yield* eventually(control.getRun(runId), (s) => s.status === "parked")
      expect(parked.waitingReason).toBe("event")
      expect(parked.pendingWaits?.map((w) => [w.name, w.request])).toEqual([["go", { q: 1 }]])
      const input = { runId, idempotencyKey: "s", signal: { name: "go", payload: { x: 1 } } }
      expect(yield* control.signal(input)).toEqual({ _tag: "Accepted", receiptId: "s", runId })
      yield* eventually(control.getRun(runId), (s) => s.status === "completed")
      expect(yield* Ref.get(seen)).toEqual([{ x: 1 }])
      const commands = yield* runtime.signalCommands({ runId })
      expect(commands.map((c) => c.state)).toEqual(["delivered"])
      expect(yield* runtime.pendingResumes).toEqual([])
      expect(yield* control.signal(input)).toEqual({ _tag: "AlreadyApplied", receiptId: "s", runId })
      expect(yield* Ref.get(drives)).toBe(2)
      expect(yield* runtime.signalCommands({ runId })).toHaveLength(1)
    })))

  it.effect("[19] a body parked on a node approval proceeds past the gate once approved; the delegation is cleared", () =>
    provide(Effect.gen(function*() {
      const passed = yield* Ref.make(false)
      const { control, runtime } = yield* hostWith(hostP, {
        F: (ctx) =>
          Effect.gen(function*() {
            const token = yield* ctx.approval({ _tag: "Node", runId: ctx.runId, requestId: "gate", digest: "g", envelope })
            yield* Ref.set(passed, true)
            return token.scope
          })
      })
      const runId = yield* launch(control, "r")
      const parked = yield* eventually(control.getRun(runId), (s) => s.status === "waiting-approval")
      expect(parked.pendingWaits?.[0]).toMatchObject({ reason: "approval", name: "gate" })
      const receipt = yield* control.approve({
        target: { _tag: "Node", runId, requestId: "gate", digest: "g", envelope },
        scope: "once",
        idempotencyKey: "a"
      })
      expect(receipt).toEqual({ _tag: "Accepted", receiptId: "a", runId })
      yield* eventually(control.getRun(runId), (s) => s.status === "completed")
      expect(yield* Ref.get(passed)).toBe(true)
      expect(yield* runtime.pendingResumes).toEqual([])
    })))

  it.effect("a denied node approval fails the body with ApprovalDenied and the run is failed", () =>
    provide(Effect.gen(function*() {
      const denial = yield* Deferred.make<unknown>()
      const { control } = yield* hostWith(hostP, {
        F: (ctx) =>
          ctx.approval({ _tag: "Node", runId: ctx.runId, requestId: "gate", digest: "g", envelope }).pipe(
            Effect.tapError((error) => (error._tag === "ApprovalDenied" ? Deferred.succeed(denial, error) : Effect.void)),
            Effect.as(null)
          )
      })
      const runId = yield* launch(control, "r")
      yield* eventually(control.getRun(runId), (s) => s.status === "waiting-approval")
      yield* control.deny({
        target: { _tag: "Node", runId, requestId: "gate", digest: "g", envelope },
        scope: "once",
        idempotencyKey: "d",
        reason: "not now"
      })
      yield* eventually(control.getRun(runId), (s) => s.status === "failed")
      expect(yield* Deferred.await(denial)).toMatchObject({ _tag: "ApprovalDenied", reason: "not now" })
    })))

  it.effect("[33] cancelling a run a live peer drives records one attributed request; the peer's poll cancels it", () =>
    provide(Effect.gen(function*() {
      const peer = yield* hostWith(hostP, { F: () => Effect.never })
      const store = yield* RunStore.RunStore
      const runId = yield* launch(peer.control, "r")
      expect((yield* peer.control.getRun(runId)).status).toBe("running")
      const operator = yield* hostWith(hostQ, {})
      const input = { runId, idempotencyKey: "c", reason: "enough" }
      expect(yield* operator.control.cancel(input)).toEqual({ _tag: "Accepted", receiptId: "c", runId })
      expect(yield* operator.control.cancel(input)).toEqual({ _tag: "Accepted", receiptId: "c", runId })
      const row = yield* store.get(runId)
      expect(row.cancelRequestedAtMs).not.toBeNull()
      expect(row.status).toBe("running")
      expect((yield* eventTypes(runId)).filter((k) => k === "control.run.cancel-requested")).toHaveLength(1)
      // The peer's FiberHost notices the request on its next poll.
      yield* TestClock.adjust("1 second")
      const cancelled = yield* eventually(operator.control.getRun(runId), (s) => s.status === "cancelled")
      expect(cancelled.cancellation).toMatchObject({ source: "control", reason: "enough" })
    })))

  it.effect("a replayed launch whose launcher died before handing the run takes it over and hands it again", () =>
    provide(Effect.gen(function*() {
      // Host P commits the launch, then dies inside the hand-off (its executor never answers).
      const dying = yield* hostWith(hostP, {}, {}, ControlExecutor.makeNoop({ launch: () => Effect.never }))
      const card = yield* dying.control.plan({ flowId: "F", input: { a: 1 } })
      yield* dying.control.approve(card.approval)
      const input = {
        _tag: "Plan" as const,
        planId: card.planId,
        digest: card.digest,
        envelope: card.envelope,
        idempotencyKey: "r"
      }
      const launching = yield* Effect.fork(dying.control.run(input))
      const ids = yield* eventually(dying.runtime.pageRunIds({ limit: 10 }), (page) => page.ids.length === 1)
      const runId = ids.ids[0]!
      yield* eventually(dying.control.getRun(runId), (s) => s.status === "accepted" && s.ownerId !== undefined)
      yield* Fiber.interrupt(launching)
      // Host Q replays the key once P's lease is stale and P is known dead.
      const survivor = yield* hostWith(hostQ, { F: () => Effect.succeed(42) }, { isAlive: () => Effect.succeed(false) })
      yield* TestClock.adjust("31 seconds")
      const replay = yield* survivor.control.run(input)
      expect(replay).toEqual({ _tag: "AlreadyApplied", receiptId: "r", runId })
      const done = yield* eventually(survivor.control.getRun(runId), (s) => s.status === "completed")
      expect(done.runId).toBe(runId)
      expect(yield* survivor.runtime.pageRunIds({ limit: 10 })).toMatchObject({ ids: [runId] })
    })))

  it.effect("a resume handed to the live host that parked the run is picked up by that host's poll", () =>
    provide(Effect.gen(function*() {
      const drives = yield* Ref.make(0)
      const parker = yield* hostWith(hostP, {
        F: (ctx) => Ref.update(drives, (n) => n + 1).pipe(Effect.zipRight(ctx.waitFor("go")))
      })
      const runId = yield* launch(parker.control, "r")
      yield* eventually(parker.control.getRun(runId), (s) => s.status === "parked")
      const operator = yield* hostWith(hostQ, {})
      const receipt = yield* operator.control.resume({ runId, idempotencyKey: "s" })
      expect(receipt).toEqual({ _tag: "Accepted", receiptId: "s", runId, handedTo: { hostId: "host-p", pid: 1 } })
      expect((yield* operator.runtime.pendingResumes).map((d) => d.runId)).toEqual([runId])
      yield* TestClock.adjust("1 second")
      yield* eventually(parker.runtime.pendingResumes, (all) => all.length === 0)
      yield* eventually(Ref.get(drives), (n) => n === 2)
      // Re-driven from the top, the body waits again and parks again on this host.
      const again = yield* eventually(parker.control.getRun(runId), (s) => s.status === "parked")
      expect(JSON.parse(again.parkedBy!)).toMatchObject({ hostId: "host-p", pid: 1 })
    })))
})
