/**
 * Lost claim races between hosts are benign: a run another process settles between a host's
 * discovery (or take-up) and its claim is logged at DEBUG without a cause, never as a WARN, and the
 * host does not drive it. The race is made deterministic by the host's catalog loader, which the
 * host calls while it works on a run (its drift check): there the test cancels the run from a client.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Control from "@baton/control/Control"
import * as ControlError from "@baton/control/ControlError"
import * as Journal from "@baton/journal/Journal"
import { Cause, type Context, Effect, FiberId, FiberRef, HashMap, Layer, Option, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { isLostRace } from "../src/internal/hostRaces.js"
import * as Step from "../src/Step.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"
import { awaitStatus, launch } from "./fixtures/runtimeSupport.js"
import * as TestLogger from "./support/testLogger.js"

const inContext = <R>(context: Context.Context<R>) => <A, E>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, context)

const bodies: Array<string> = []
const quick = Flow.make({
  id: "races.quick",
  description: "one step",
  version: "1",
  input: Schema.Unknown,
  handler: () => Step.run("only", Effect.sync(() => bodies.push("quick")))
})
const parks = Flow.make({
  id: "races.parks",
  description: "parks on a signal, then one step",
  version: "1",
  input: Schema.Unknown,
  handler: () => Effect.zipRight(Step.waitForSignal("go"), Step.run("after", Effect.sync(() => bodies.push("parks"))))
})
const flows = [quick, parks]

/**
 * A catalog loader that, the first time the host calls it while working on `target.runId` (its log
 * annotations name the run), cancels that run through `target.client` before answering.
 */
const cancellingCatalog = (target: { runId?: string; client?: Context.Context<Control.Control>; fired: boolean }) => () =>
  Effect.gen(function*() {
    const annotations = yield* FiberRef.get(FiberRef.currentLogAnnotations)
    const working = HashMap.get(annotations, "runId")
    if (!target.fired && target.runId !== undefined && Option.getOrUndefined(working) === target.runId) {
      target.fired = true
      const runId = target.runId
      yield* Effect.flatMap(Control.Control, (c) => c.cancel({ runId, idempotencyKey: `race-cancel-${runId}` })).pipe(
        Effect.provide(target.client!),
        Effect.orDie
      )
    }
    return flows
  })

const driven = (runId: string) =>
  Effect.flatMap(Journal.Journal, (j) => j.entries({ runId: runId as never, eventTypes: ["baton.run.driven"], limit: 100 }))

describe("lost claim races", () => {
  it.scopedLive("a released run settled between discovery and the claim logs DEBUG without a cause and no WARN, and is not driven", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const client = yield* Layer.build(
        NodeRuntime.layer({ filename: db.filename, flows, mode: "client", hostId: "remote-cli" })
      )
      // Launched while no host runs: the run is released, a discovery candidate for the next host.
      const runId = yield* launch("races.quick", null).pipe(inContext(client))
      const target = { runId, client, fired: false }
      const recorder = TestLogger.make()
      // A per-host limit on the run's queue: the host claims it one at a time (a batch claim reads and
      // claims in one write, which leaves this race no window).
      const host = yield* recorder.capture(
        Layer.build(NodeRuntime.layer({
          filename: db.filename,
          loadFlows: cancellingCatalog(target),
          pollInterval: "10 seconds",
          queues: { default: { concurrency: 4 } }
        }))
      )
      yield* recorder.capture(Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(host)))
      yield* awaitStatus(runId, ["cancelled"]).pipe(inContext(client))
      yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.owned).pipe(
        inContext(host),
        Effect.filterOrFail((owned) => owned.length === 0),
        Effect.eventually,
        Effect.timeout("10 seconds")
      )
      expect(target.fired).toBe(true)
      expect(recorder.lines.filter((line) => line.level === "WARN" || line.level === "ERROR")).toEqual([])
      const races = recorder.lines.filter((line) => line.message.includes(`lost the race for run ${runId}`))
      expect(races.map((line) => ({ level: line.level, hasCause: line.hasCause }))).toEqual([{ level: "DEBUG", hasCause: false }])
      expect((yield* driven(runId).pipe(inContext(client))).entries).toEqual([])
      expect(bodies).not.toContain("quick")
    }))

  it.scopedLive("a parked run settled while a signal's resume is taken up logs DEBUG without a cause and no WARN, and is not driven", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const client = yield* Layer.build(
        NodeRuntime.layer({ filename: db.filename, flows, mode: "client", hostId: "remote-cli" })
      )
      const runId = yield* Effect.scoped(Effect.gen(function*() {
        const first = yield* Layer.build(NodeRuntime.layer({ filename: db.filename, flows, pollInterval: "100 millis" }))
        const id = yield* launch("races.parks", null).pipe(inContext(first))
        yield* awaitStatus(id, ["parked"]).pipe(inContext(first))
        return id
      }))
      yield* Effect.flatMap(Control.Control, (c) =>
        c.signal({ runId, signal: { name: "go", payload: { n: 1 } }, idempotencyKey: `signal-${runId}` })).pipe(
          inContext(client)
        )
      const target = { runId, client, fired: false }
      const recorder = TestLogger.make()
      const host = yield* recorder.capture(
        Layer.build(NodeRuntime.layer({ filename: db.filename, loadFlows: cancellingCatalog(target), pollInterval: "10 seconds" }))
      )
      yield* recorder.capture(Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(host)))
      yield* awaitStatus(runId, ["cancelled"]).pipe(inContext(client))
      yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.owned).pipe(
        inContext(host),
        Effect.filterOrFail((owned) => owned.length === 0),
        Effect.eventually,
        Effect.timeout("10 seconds")
      )
      expect(target.fired).toBe(true)
      expect(recorder.lines.filter((line) => line.level === "WARN" || line.level === "ERROR")).toEqual([])
      const races = recorder.lines.filter((line) => line.message.includes(`lost the race for run ${runId}`))
      expect(races.map((line) => ({ level: line.level, hasCause: line.hasCause }))).toEqual([{ level: "DEBUG", hasCause: false }])
      // Only the first host's drive, which parked the run.
      expect((yield* driven(runId).pipe(inContext(client))).entries).toHaveLength(1)
      expect(bodies).not.toContain("parks")
    }))

  it("lost claims and fences are races; storage failures, defects and interruptions stay warnings", () => {
    expect(isLostRace(Cause.fail(new ControlError.ClaimLost({ runId: "r" })))).toBe(true)
    expect(isLostRace(Cause.fail(new ControlError.ClaimLost({ runId: "r", reason: "SnapshotChanged" })))).toBe(true)
    expect(isLostRace(Cause.fail({ _tag: "FenceLost" }))).toBe(true)
    expect(isLostRace(Cause.fail({ _tag: "AlreadyClaimed" }))).toBe(true)
    expect(isLostRace(Cause.fail(new ControlError.PersistenceError({ operation: "claim a run", message: "disk I/O error" }))))
      .toBe(false)
    expect(isLostRace(Cause.fail(new ControlError.RunNotFound({ runId: "r" })))).toBe(false)
    expect(isLostRace(Cause.die(new Error("bug")))).toBe(false)
    expect(isLostRace(Cause.sequential(Cause.fail({ _tag: "FenceLost" }), Cause.die(new Error("bug"))))).toBe(false)
    expect(isLostRace(Cause.interrupt(FiberId.none))).toBe(false)
  })
})
