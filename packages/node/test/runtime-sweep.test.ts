/**
 * The host sweep in-process over one SQLite file (node.md 4.5): no double claims of a live run
 * (check 15), cancels requested elsewhere (check 10), startup recovery of approvals, signals and
 * released runs (check 19), orphaned claims (check 20), and code drift (check 32).
 */
import { describe, expect, it, vi } from "@effect/vitest"
import * as Control from "@baton/control/Control"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Companion from "@baton/journal/Companion"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as RunStore from "@baton/run-store/RunStore"
import { type Context, Effect, Layer, Option, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Run from "../src/Run.js"
import * as Step from "../src/Step.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"
import { awaitStatus, expectCompleted, launch } from "./fixtures/runtimeSupport.js"
import * as TestLogger from "./support/testLogger.js"

const bodies = new Map<string, number>()
const count = (key: string) => Effect.sync(() => bodies.set(key, (bodies.get(key) ?? 0) + 1))
const finals: Array<string> = []

const hold = Flow.make({
  id: "sweep.hold",
  description: "holds for a while",
  version: "1",
  input: Schema.Struct({ ms: Schema.Number }),
  handler: ({ ms }) =>
    Effect.gen(function*() {
      const { runId } = yield* Run.Run
      yield* Step.run("hold", Effect.zipRight(count(runId), Effect.sleep(ms)))
      return { held: ms }
    }).pipe(Effect.onInterrupt(() =>
      Effect.flatMap(Run.endReason, (reason) => Effect.sync(() => finals.push(Option.getOrElse(reason, () => "none")))))
    )
})

const waits = Flow.make({
  id: "sweep.waits",
  description: "waits for an approval or a signal",
  version: "1",
  input: Schema.Struct({ kind: Schema.Literal("approval", "signal", "none") }),
  handler: ({ kind }) =>
    kind === "approval"
      ? Effect.as(Step.waitForApproval("deploy"), "approved")
      : kind === "signal"
      ? Step.waitForSignal("go")
      : Effect.succeed("plain")
})

const fast = { pollInterval: "100 millis" } as const
const build = <A, E>(layer: Layer.Layer<A, E>) => Layer.build(layer)
const inContext = <R>(context: Context.Context<R>) => <A, E>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, context)

describe("host sweep", () => {
  it.scopedLive("B-004: neither sweeps nor a second runtime in this process claim a run driven with a fresh lease", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const one = yield* build(NodeRuntime.layer({ ...fast, filename: db.filename, flows: [hold] }))
      const two = yield* build(NodeRuntime.layer({ ...fast, filename: db.filename, flows: [hold] }))
      const runId = yield* launch("sweep.hold", { ms: 1500 }).pipe(inContext(one))
      yield* awaitStatus(runId, ["running"]).pipe(inContext(one))
      for (let i = 0; i < 5; i++) {
        yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(one))
        yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(two))
      }
      yield* expectCompleted(runId).pipe(inContext(one))
      const facts = yield* Companion.entries(Companion.runStore.stream, runId, { limit: 100 }).pipe(inContext(one))
      expect(facts.entries.filter((e) => e.eventType === "flows.consensus.activated")).toHaveLength(1)
      expect(bodies.get(runId)).toBe(1)
      const ownedTwo = yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.owned).pipe(inContext(two))
      expect(ownedTwo).toEqual([])
    }))

  it.scopedLive("a cancel requested by another process is found by the sweep and settled with flows.engine.interrupted", () =>
    Effect.gen(function*() {
      const db = tempDb()
      yield* build(NodeRuntime.layer({ ...fast, filename: db.filename, flows: [hold] }))
      const client = yield* build(
        NodeRuntime.layer({ filename: db.filename, flows: [hold], mode: "client", hostId: "remote-cli" })
      )
      const runId = yield* launch("sweep.hold", { ms: 60_000 }).pipe(inContext(client))
      yield* awaitStatus(runId, ["running"]).pipe(inContext(client))
      yield* Effect.sleep("200 millis")
      const receipt = yield* Effect.flatMap(Control.Control, (c) =>
        c.cancel({ runId, idempotencyKey: "cancel-remote", reason: "stop" })).pipe(inContext(client))
      expect(receipt._tag).toBe("Accepted")
      const done = yield* awaitStatus(runId, ["cancelled", "completed", "failed"], "10 seconds").pipe(inContext(client))
      expect(done.status).toBe("cancelled")
      expect(finals).toContain("cancelled")
      const attempts = yield* Effect.flatMap(AttemptStore.AttemptStore, (s) => s.list(runId)).pipe(inContext(client))
      expect(attempts.find((a) => (a.meta as { name: string }).name === "hold")?.state).toBe("interrupted")
      const journal = yield* Effect.flatMap(Journal.Journal, (j) => j.entries({ runId: runId as never, limit: 1000 })).pipe(
        inContext(client)
      )
      const types = journal.entries.map((e) => e.eventType)
      const requested = types.indexOf("control.run.cancel-requested")
      const interrupted = types.indexOf("flows.engine.interrupted")
      expect(requested).toBeGreaterThanOrEqual(0)
      expect(interrupted).toBeGreaterThan(requested)
      expect(journal.entries[interrupted]?.payload).toMatchObject({ outcome: "cancelled" })
      const row = yield* Effect.flatMap(RunStore.RunStore, (s) => s.get(runId)).pipe(inContext(client))
      expect(row.cancelRequestedAtMs).not.toBeNull()
    }))

  it.scopedLive("startup recovery: an approved, a signalled and a released run complete once a host starts", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const client = yield* build(
        NodeRuntime.layer({ filename: db.filename, flows: [waits], mode: "client", hostId: "remote-cli" })
      )
      const [approval, signal] = yield* Effect.scoped(Effect.gen(function*() {
        const first = yield* build(NodeRuntime.layer({ ...fast, filename: db.filename, flows: [waits] }))
        const a = yield* launch("sweep.waits", { kind: "approval" }).pipe(inContext(first))
        const s = yield* launch("sweep.waits", { kind: "signal" }).pipe(inContext(first))
        yield* awaitStatus(a, ["waiting-approval"]).pipe(inContext(first))
        yield* awaitStatus(s, ["parked"]).pipe(inContext(first))
        return [a, s] as const
      }))
      // No host runs now: decide, signal and launch from the client.
      const control = yield* Effect.provide(Control.Control, client)
      const runtime = yield* Effect.provide(ControlRuntime.ControlRuntime, client)
      const waiting = yield* runtime.getRun(approval)
      const wait = waiting.pendingWaits!.find((w) => w.reason === "approval")!
      yield* control.approve({
        target: {
          _tag: "Node",
          runId: approval,
          requestId: "deploy",
          digest: wait.tokenDigest!,
          envelope: (yield* runtime.getPlan(waiting.planId!)).card.envelope
        },
        scope: "once",
        idempotencyKey: "approve-offline"
      })
      yield* control.signal({ runId: signal, signal: { name: "go", payload: { n: 1 } }, idempotencyKey: "signal-offline" })
      const released = yield* launch("sweep.waits", { kind: "none" }).pipe(inContext(client))
      expect((yield* runtime.getRun(released)).status).toBe("accepted")
      expect((yield* runtime.pendingResumes).length).toBeGreaterThan(0)
      yield* build(NodeRuntime.layer({ ...fast, filename: db.filename, flows: [waits] }))
      for (const runId of [approval, signal, released]) yield* expectCompleted(runId).pipe(inContext(client))
      expect(yield* runtime.pendingResumes).toEqual([])
      const commands = yield* runtime.signalCommands({ runId: signal })
      expect(commands.map((c) => c.state)).toEqual(["delivered"])
    }))

  it.scopedLive("an orphaned claim of a dead claimant is recovered by the sweep (expired fact)", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const host = yield* build(NodeRuntime.layer({ ...fast, filename: db.filename, flows: [waits] }))
      const runId = yield* launch("sweep.waits", { kind: "signal" }).pipe(inContext(host))
      yield* awaitStatus(runId, ["parked"]).pipe(inContext(host))
      const store = yield* Effect.provide(RunStore.RunStore, host)
      const row = yield* store.get(runId)
      const now = Date.now()
      const dead = { hostId: "gone-host", pid: 99, nonce: "n1-x-000000000000.dead" }
      const claimed = yield* store.claim(runId, row, dead, now - 40_000).pipe(
        Effect.provide(Layer.succeedContext(host))
      )
      expect(claimed._tag).toBe("Claimed")
      yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(host))
      const after = yield* store.get(runId)
      expect(after.claim).toBeNull()
      const facts = yield* Companion.entries(Companion.runStore.stream, runId, { limit: 100 }).pipe(inContext(host))
      expect(facts.entries.map((e) => e.eventType)).toContain("flows.consensus.expired")
    }))

  it.scopedLive("a host running another version of the flow skips the run and says why", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const v1 = Flow.make({ ...holdDefinition, version: "1" })
      const v2 = Flow.make({ ...holdDefinition, version: "2" })
      const client = yield* build(
        NodeRuntime.layer({ filename: db.filename, flows: [v1], mode: "client", hostId: "remote-cli" })
      )
      const runId = yield* launch("sweep.drift", null).pipe(inContext(client))
      const spy = vi.spyOn(console, "log")
      yield* Effect.addFinalizer(() => Effect.sync(() => spy.mockRestore()))
      const host = yield* build(NodeRuntime.layer({ ...fast, filename: db.filename, flows: [v2] }))
      yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(host))
      yield* Effect.sleep("300 millis")
      const summary = yield* Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)).pipe(inContext(client))
      expect(summary.status).toBe("accepted")
      expect(summary.ownerId).toBeUndefined()
      const lines = spy.mock.calls.map((call) => call.map(String).join(" "))
      expect(lines.filter((line) =>
        line.includes(
          `run ${runId} of flow sweep.drift recorded 1; this host runs 2; resume it with --allow-code-drift from this host's catalog`
        )
      )).toHaveLength(1)
    }))

  it.scopedLive("a host running another version of a parked run's flow logs the skip once at WARN, naming run, flow and both versions", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const v1 = Flow.make({ ...parkDefinition, version: "1" })
      const v2 = Flow.make({ ...parkDefinition, version: "2" })
      const client = yield* build(
        NodeRuntime.layer({ filename: db.filename, flows: [v1], mode: "client", hostId: "remote-cli" })
      )
      // A v1 host parks the run, then shuts down.
      const runId = yield* Effect.scoped(Effect.gen(function*() {
        const first = yield* build(NodeRuntime.layer({ ...fast, filename: db.filename, flows: [v1] }))
        const id = yield* launch("sweep.drift-park", null).pipe(inContext(first))
        yield* awaitStatus(id, ["parked"]).pipe(inContext(first))
        return id
      }))
      // The signal leaves a pending command and a resume delegation for whichever host serves the flow.
      yield* Effect.flatMap(Control.Control, (c) =>
        c.signal({ runId, signal: { name: "go", payload: { n: 1 } }, idempotencyKey: `signal-${runId}` })).pipe(
          inContext(client)
        )
      const recorder = TestLogger.make()
      yield* recorder.capture(Effect.gen(function*() {
        const host = yield* build(NodeRuntime.layer({ ...fast, filename: db.filename, flows: [v2] }))
        for (let i = 0; i < 4; i++) yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(host))
      }))
      const summary = yield* Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)).pipe(inContext(client))
      expect(summary.status).toBe("parked")
      const skips = recorder.lines.filter((line) => line.message.includes(`run ${runId} `))
      expect(skips.map((line) => line.level)).toEqual(["WARN"])
      expect(skips[0]!.message).toContain(`run ${runId} of flow sweep.drift-park recorded 1; this host runs 2;`)
      expect(skips[0]!.annotations).toMatchObject({ runId, flowId: "sweep.drift-park", recordedVersion: "1", hostVersion: "2" })
    }))
})

const parkDefinition = {
  id: "sweep.drift-park",
  description: "parks on a signal",
  input: Schema.Unknown,
  handler: () => Step.waitForSignal("go")
}

const holdDefinition = {
  id: "sweep.drift",
  description: "drift",
  input: Schema.Unknown,
  handler: () => Effect.succeed("ran")
}
