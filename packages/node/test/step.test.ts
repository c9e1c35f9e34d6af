import { describe, expect, it } from "@effect/vitest"
import * as Control from "@baton/control/Control"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as RunStore from "@baton/run-store/RunStore"
import { Deferred, Effect, Option, Ref, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Run from "../src/Run.js"
import * as Step from "../src/Step.js"
import { awaitStatus, expectCompleted, launch } from "./fixtures/runtimeSupport.js"

const fast = { pollInterval: "100 millis" } as const

const entriesOf = (runId: string) =>
  Effect.flatMap(Journal.Journal, (journal) => journal.entries({ runId: runId as never, limit: 1000 })).pipe(
    Effect.map((page) => page.entries)
  )

const attemptsOf = (runId: string) => Effect.flatMap(AttemptStore.AttemptStore, (store) => store.list(runId))
const named = (attempts: ReadonlyArray<AttemptStore.Attempt>, name: string) =>
  attempts.filter((a) => (a.meta as { name?: string }).name === name).sort((x, y) => x.attempt - y.attempt)

const simple = (id: string, handler: (input: unknown) => Effect.Effect<unknown, unknown, Run.Run>) =>
  Flow.make({ id, description: id, version: "1", input: Schema.Unknown, handler })

describe("Step", () => {
  it.live("a name used twice fails the run with StepMisuse duplicate_step", () =>
    Effect.gen(function*() {
      const runId = yield* launch("dup", null)
      const summary = yield* awaitStatus(runId, ["failed", "completed"])
      expect(summary.status).toBe("failed")
      const result = named(yield* attemptsOf(runId), "$result")[0]
      expect(result?.state).toBe("failed")
      expect((result?.error as { message: string }).message).toContain("StepMisuse duplicate_step")
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [simple("dup", () => Effect.zipRight(Step.run("x", Effect.succeed(1)), Step.run("x", Effect.succeed(2))))]
    }))))

  it.live("a step returning a function fails the run with result_not_json; bad names are invalid_name", () =>
    Effect.gen(function*() {
      const fn = yield* launch("fn", null)
      expect((yield* awaitStatus(fn, ["failed", "completed"])).status).toBe("failed")
      const error = named(yield* attemptsOf(fn), "$result")[0]?.error as { message: string }
      expect(error.message).toContain("StepMisuse result_not_json")
      const bad = yield* launch("dollar", null)
      expect((yield* awaitStatus(bad, ["failed", "completed"])).status).toBe("failed")
      expect((named(yield* attemptsOf(bad), "$result")[0]?.error as { message: string }).message)
        .toContain("StepMisuse invalid_name")
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [
        simple("fn", () => Step.run("f", Effect.succeed(() => 1))),
        simple("dollar", () => Step.run("$result", Effect.succeed(1)))
      ]
    }))))

  it.live("a failing step is retried; only success is memoized", () =>
    Effect.gen(function*() {
      const runId = yield* launch("retry", null)
      expect((yield* awaitStatus(runId, ["failed", "completed"])).status).toBe("completed")
      const attempts = named(yield* attemptsOf(runId), "flaky")
      expect(attempts.map((a) => a.state)).toEqual(["failed", "failed", "completed"])
      expect(attempts[0]?.error).toMatchObject({ message: "try 1" })
      const types = (yield* entriesOf(runId)).map((e) => e.eventType)
      expect(types.filter((t) => t === "baton.step.failed")).toHaveLength(2)
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [Flow.make({
        id: "retry",
        description: "retry",
        input: Schema.Unknown,
        handler: () =>
          Effect.gen(function*() {
            let tries = 0
            return yield* Step.run(
              "flaky",
              Effect.suspend(() => ++tries < 3 ? Effect.fail(new Error(`try ${tries}`)) : Effect.succeed(tries)),
              { retry: { times: 3, delay: "10 millis" } }
            )
          })
      })]
    }))))

  it.live("Run.emit appends under the fence and refuses Baton's own prefixes", () =>
    Effect.gen(function*() {
      const ok = yield* launch("emit", "app.note")
      yield* expectCompleted(ok)
      const entry = (yield* entriesOf(ok)).find((e) => e.eventType === "app.note")
      expect(entry?.payload).toEqual({ hello: 1 })
      const refused = yield* launch("emit", "baton.fake")
      expect((yield* awaitStatus(refused, ["failed", "completed"])).status).toBe("failed")
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [simple("emit", (type) => Run.emit(type as string, { hello: 1 }))]
    }))))

  it.live("waitForSignal parks the run; a signal resumes it with the payload; an early signal never parks", () =>
    Effect.gen(function*() {
      const control = yield* Control.Control
      const runId = yield* launch("signal", null)
      const parked = yield* awaitStatus(runId, ["parked"])
      expect(parked.pendingWaits?.[0]).toMatchObject({ reason: "event", name: "go" })
      const receipt = yield* control.signal({ runId, signal: { name: "go", payload: { n: 1 } }, idempotencyKey: "sig-1" })
      expect(receipt._tag).toBe("Accepted")
      const done = yield* awaitStatus(runId, ["completed", "failed"])
      expect(done.status).toBe("completed")
      expect(named(yield* attemptsOf(runId), "$result")[0]?.outcome).toEqual({ value: { n: 1 } })
      const types = (yield* entriesOf(runId)).map((e) => e.eventType)
      expect(types).toContain("baton.run.parked")
      expect(types.filter((t) => t === "baton.run.driven")).toHaveLength(2)
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [simple("signal", () => Step.waitForSignal("go"))]
    }))))

  it.live("a signal sent before the wait opens is delivered without a park", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const control = yield* Control.Control
      const runtime = yield* ControlRuntime.ControlRuntime
      const runId = yield* launch("early", null)
      yield* awaitStatus(runId, ["running", "accepted"])
      yield* control.signal({ runId, signal: { name: "go", payload: { early: true } }, idempotencyKey: "sig-early" })
      yield* Deferred.succeed(gate, undefined)
      yield* expectCompleted(runId)
      const types = (yield* entriesOf(runId)).map((e) => e.eventType)
      expect(types).not.toContain("baton.run.parked")
      const commands = yield* runtime.signalCommands({ runId })
      expect(commands.map((c) => c.state)).toEqual(["delivered"])
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [simple("early", () =>
        Effect.gen(function*() {
          yield* Step.run("wait-gate", Effect.promise(() => new Promise((r) => setTimeout(r, 300))))
          return yield* Step.waitForSignal("go")
        }))]
    }))))

  it.live("waitForApproval parks as waiting-approval; approve resumes it, deny fails it with ApprovalDenied", () =>
    Effect.gen(function*() {
      const control = yield* Control.Control
      const runtime = yield* ControlRuntime.ControlRuntime
      const decide = (runId: string, how: "approve" | "deny") =>
        Effect.gen(function*() {
          const summary = yield* awaitStatus(runId, ["waiting-approval"])
          const wait = summary.pendingWaits?.find((w) => w.reason === "approval")
          expect(wait?.name).toBe("deploy")
          const target = {
            _tag: "Node" as const,
            runId,
            requestId: "deploy",
            digest: wait!.tokenDigest!,
            envelope: (yield* runtime.getPlan(summary.planId!)).card.envelope
          }
          yield* control[how]({
            target,
            scope: "once",
            idempotencyKey: `${how}-${runId}`,
            principal: { id: "bob", kind: "operator" },
            reason: "no"
          })
        })
      const approved = yield* launch("approval", null)
      yield* decide(approved, "approve")
      yield* expectCompleted(approved)
      const denied = yield* launch("approval", null)
      yield* decide(denied, "deny")
      expect((yield* awaitStatus(denied, ["completed", "failed"])).status).toBe("failed")
      const error = named(yield* attemptsOf(denied), "$result")[0]?.error
      expect(error).toMatchObject({
        tag: "ApprovalDenied",
        message: "approval denied by operator:bob: no",
        principal: { id: "bob", kind: "operator" },
        reason: "no"
      })
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [simple("approval", () => Effect.as(Step.waitForApproval("deploy"), "shipped"))]
    }))))

  it.live("cancel interrupts the drive: finalizer runs, attempt interrupted, journal records the cancel", () =>
    Effect.gen(function*() {
      const control = yield* Control.Control
      const store = yield* RunStore.RunStore
      const runId = yield* launch("cancel", null)
      yield* awaitStatus(runId, ["running"])
      yield* Effect.sleep("300 millis")
      const receipt = yield* control.cancel({ runId, idempotencyKey: "cancel-1", reason: "stop" })
      expect(["Accepted", "Terminal"]).toContain(receipt._tag)
      expect((yield* awaitStatus(runId, ["cancelled", "completed", "failed"], "5 seconds")).status).toBe("cancelled")
      expect(yield* Ref.get(finalized)).toEqual(["cancelled"])
      const attempts = named(yield* attemptsOf(runId), "forever")
      expect(attempts[0]?.state).toBe("interrupted")
      const types = (yield* entriesOf(runId)).map((e) => e.eventType)
      expect(types).toContain("control.run.cancel-requested")
      const row = yield* store.get(runId)
      expect(row.status).toBe("cancelled")
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [simple("cancel", () =>
        Step.run("forever", Effect.never).pipe(
          Effect.onInterrupt(() =>
            Effect.flatMap(Run.endReason, (reason) =>
              Ref.update(finalized, (all) => [...all, Option.getOrElse(reason, () => "none")]))
          )
        ))]
    }))))
})

const finalized = Ref.unsafeMake<ReadonlyArray<string>>([])
