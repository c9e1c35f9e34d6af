/**
 * Queue semantics of one host in process over a SQLite file: claim order (priority, availability,
 * creation), delays, pause and resume, the per-host limit, the prompt wake when a slot frees, and
 * `NodeHost.wake`. Released runs are launched by a client runtime (no host takes them there) and
 * placed in their queue with an UPDATE of `control_runs`.
 */
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Queues from "@baton/control/Queues"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { type Context, Deferred, Effect, Layer } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"
import { awaitStatus, launch } from "./fixtures/runtimeSupport.js"
import { hold, latch, lines, peakOverlap, started } from "./fixtures/queueFlows.js"

type Ctx = Context.Context<NodeRuntime.Provided>
const inContext = (context: Ctx) => <A, E>(effect: Effect.Effect<A, E, NodeRuntime.Provided>) => Effect.provide(effect, context)

interface Placement {
  readonly queue?: string
  readonly priority?: number
  readonly availableAtMs?: number
  readonly ms?: number
  readonly tag?: string
}

/** A released run of `queue-test.hold`, launched by `client` and placed. */
const releasedRun = (client: Ctx, placement: Placement = {}) =>
  Effect.gen(function*() {
    const runId = yield* launch("queue-test.hold", {
      ms: placement.ms ?? 10,
      ...(placement.tag === undefined ? {} : { tag: placement.tag })
    })
    expect((yield* Effect.flatMap(ControlRuntime.ControlRuntime, (rt) => rt.getRun(runId))).status).toBe("accepted")
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE control_runs SET queue = ${placement.queue ?? "default"}, priority = ${placement.priority ?? 0},
      available_at_ms = ${placement.availableAtMs ?? 0} WHERE run_id = ${runId}`
    return runId
  }).pipe(inContext(client))

const clientOn = (filename: string) =>
  Layer.build(NodeRuntime.layer({ filename, flows: [hold], mode: "client", hostId: "queue-client" }))

const hostOn = (filename: string, options: Partial<NodeRuntime.Options> = {}) =>
  Layer.build(NodeRuntime.layer({ filename, flows: [hold], pollInterval: "200 millis", ...options }))

const hostOf = (context: Ctx) => Effect.provide(NodeRuntime.NodeHost, context)

// Run ids restart at run-1 in every database: forget the bodies of earlier tests.
const fresh = () => {
  started.length = 0
  lines.length = 0
  return tempDb()
}

const startsOf = (ids: ReadonlyArray<string>) => started.filter((id) => ids.includes(id))

describe("queues on one host", () => {
  it.scopedLive("a host takes released runs by priority, then availability, then creation, one per freed slot without waiting for a tick", () =>
    Effect.gen(function*() {
      const db = fresh()
      const client = yield* clientOn(db.filename)
      const now = Date.now()
      const a = yield* releasedRun(client, { priority: 0 })
      const b = yield* releasedRun(client, { priority: 7, availableAtMs: now - 1000 })
      const c = yield* releasedRun(client, { priority: 7, availableAtMs: now - 5000 })
      const d = yield* releasedRun(client, { priority: 0 })
      const e = yield* releasedRun(client, { priority: -1, queue: "other" })
      const f = yield* releasedRun(client, { priority: 7, availableAtMs: now - 5000 })
      // A tick every 10 s: the six runs complete in far less only if each freed slot wakes discovery.
      yield* hostOn(db.filename, { maxRuns: 1, pollInterval: "10 seconds" })
      for (const runId of [a, b, c, d, e, f]) yield* awaitStatus(runId, ["completed"], "8 seconds").pipe(inContext(client))
      expect(startsOf([a, b, c, d, e, f])).toEqual([c, f, b, a, d, e])
    }))

  it.scopedLive("priority holds across queues with and without limits: a limited queue's urgent runs go first", () =>
    Effect.gen(function*() {
      const db = fresh()
      const client = yield* clientOn(db.filename)
      yield* Effect.flatMap(Queues.Queues, (q) => q.setConcurrency("limited", 5)).pipe(inContext(client))
      const low = [yield* releasedRun(client, { priority: 0 }), yield* releasedRun(client, { priority: 0 })]
      const urgent = [
        yield* releasedRun(client, { priority: 10, queue: "limited" }),
        yield* releasedRun(client, { priority: 10, queue: "local" })
      ]
      const middle = yield* releasedRun(client, { priority: 5 })
      const all = [...low, ...urgent, middle]
      // "local" has this host's own limit; "limited" a global one; "default" none.
      yield* hostOn(db.filename, { maxRuns: 1, pollInterval: "10 seconds", queues: { local: { concurrency: 2 } } })
      for (const runId of all) yield* awaitStatus(runId, ["completed"], "8 seconds").pipe(inContext(client))
      expect(startsOf(all)).toEqual([...urgent, middle, ...low])
    }))

  it.scopedLive("a delayed run is not taken before its time, though its priority is higher", () =>
    Effect.gen(function*() {
      const db = fresh()
      const client = yield* clientOn(db.filename)
      const availableAtMs = Date.now() + 1500
      const delayed = yield* releasedRun(client, { priority: 9, availableAtMs })
      const now = yield* releasedRun(client, { priority: 0, ms: 10 })
      yield* hostOn(db.filename, { maxRuns: 1 })
      yield* awaitStatus(now, ["completed"]).pipe(inContext(client))
      expect((yield* Effect.flatMap(Queues.Queues, (q) => q.stats()).pipe(inContext(client)))[0]).toMatchObject({
        queue: "default",
        delayed: 1
      })
      yield* awaitStatus(delayed, ["completed"]).pipe(inContext(client))
      const start = lines.find((l) => l.kind === "start" && l.runId === delayed)!
      expect(start.atMs).toBeGreaterThanOrEqual(availableAtMs)
      expect(startsOf([delayed, now])).toEqual([now, delayed])
    }))

  it.scopedLive("pause stops new claims of the queue without touching its running run; resume restores them", () =>
    Effect.gen(function*() {
      const db = fresh()
      const client = yield* clientOn(db.filename)
      const host = yield* hostOn(db.filename)
      const running = yield* releasedRun(client, { queue: "mail", tag: "pause-running" })
      yield* awaitStatus(running, ["running"]).pipe(inContext(client))
      const queues = yield* Effect.provide(Queues.Queues, client)
      yield* queues.pause("mail")
      const store = yield* Effect.provide(RunStore.RunStore, client)
      const before = yield* store.get(running)
      const waiting = yield* releasedRun(client, { queue: "mail" })
      const elsewhere = yield* releasedRun(client, { queue: "other" })
      const node = yield* hostOf(host)
      for (let i = 0; i < 3; i++) {
        yield* node.sweepNow
        yield* node.wake
      }
      yield* awaitStatus(elsewhere, ["completed"]).pipe(inContext(client))
      expect((yield* Effect.flatMap(ControlRuntime.ControlRuntime, (rt) => rt.getRun(waiting)).pipe(inContext(client))).status)
        .toBe("accepted")
      const during = yield* store.get(running)
      expect([during.status, during.owner]).toEqual([before.status, before.owner])
      yield* Deferred.succeed(yield* latch("pause-running"), undefined)
      yield* awaitStatus(running, ["completed"]).pipe(inContext(client))
      yield* node.sweepNow
      expect((yield* Effect.flatMap(ControlRuntime.ControlRuntime, (rt) => rt.getRun(waiting)).pipe(inContext(client))).status)
        .toBe("accepted")
      expect((yield* queues.stats()).find((s) => s.queue === "mail")).toMatchObject({ available: 1, running: 0, paused: true })
      yield* queues.resume("mail")
      yield* node.wake
      yield* awaitStatus(waiting, ["completed"], "3 seconds").pipe(inContext(client))
    }))

  it.scopedLive("a per-host limit caps this host's drives of the queue; other queues use the rest of maxRuns", () =>
    Effect.gen(function*() {
      const db = fresh()
      const client = yield* clientOn(db.filename)
      const capped = [
        yield* releasedRun(client, { queue: "capped", ms: 100 }),
        yield* releasedRun(client, { queue: "capped", ms: 100 }),
        yield* releasedRun(client, { queue: "capped", ms: 100 })
      ]
      const free = [yield* releasedRun(client, { tag: "per-host" }), yield* releasedRun(client, { tag: "per-host" })]
      const host = yield* hostOn(db.filename, { maxRuns: 4, queues: { capped: { concurrency: 1 } } })
      for (const runId of free) yield* awaitStatus(runId, ["running"]).pipe(inContext(client))
      yield* awaitStatus(capped[0]!, ["completed"]).pipe(inContext(client))
      const owned = yield* Effect.flatMap(hostOf(host), (h) => h.owned)
      expect(owned.filter((o) => capped.includes(o.runId)).length).toBeLessThanOrEqual(1)
      yield* Deferred.succeed(yield* latch("per-host"), undefined)
      for (const runId of [...capped, ...free]) yield* awaitStatus(runId, ["completed"]).pipe(inContext(client))
      expect(peakOverlap(lines.filter((l) => capped.includes(l.runId)))).toBe(1)
      expect(peakOverlap(lines.filter((l) => [...capped, ...free].includes(l.runId)))).toBe(3)
    }))

  it.scopedLive("a backlog in a queue at this host's limit hides no other queue's runs behind it", () =>
    Effect.gen(function*() {
      const db = fresh()
      const client = yield* clientOn(db.filename)
      // 30 runs of "slow", the first of which holds its one slot until the latch opens; then one run
      // of "default", older runs ahead of it in claim order all in the held queue.
      const slow: Array<string> = []
      for (let i = 0; i < 30; i++) slow.push(yield* releasedRun(client, { queue: "slow", tag: "backlog", ms: 1 }))
      const other = yield* releasedRun(client, { ms: 1 })
      yield* hostOn(db.filename, { maxRuns: 4, pollInterval: "10 seconds", queues: { slow: { concurrency: 1 } } })
      yield* awaitStatus(slow[0]!, ["running"], "8 seconds").pipe(inContext(client))
      // The held queue is full on this host: the other queue's run goes on at once, not after the backlog.
      yield* awaitStatus(other, ["completed"], "8 seconds").pipe(inContext(client))
      expect(startsOf(slow)).toEqual([slow[0]])
      yield* Deferred.succeed(yield* latch("backlog"), undefined)
      for (const runId of slow) yield* awaitStatus(runId, ["completed"], "20 seconds").pipe(inContext(client))
      expect(peakOverlap(lines.filter((l) => slow.includes(l.runId)))).toBe(1)
    }))

  it.scopedLive("NodeHost.wake makes an idle host take a new run at once, not at its next tick", () =>
    Effect.gen(function*() {
      const db = fresh()
      const client = yield* clientOn(db.filename)
      const host = yield* hostOn(db.filename, { pollInterval: "10 seconds" })
      const runId = yield* releasedRun(client)
      const wokenAt = Date.now()
      yield* Effect.flatMap(hostOf(host), (h) => h.wake)
      yield* awaitStatus(runId, ["completed"], "5 seconds").pipe(inContext(client))
      expect(lines.find((l) => l.kind === "start" && l.runId === runId)!.atMs - wokenAt).toBeLessThan(5000)
    }))

  it.effect("a bad per-host queues option fails invalid_options naming the field, before anything opens", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [[], "queues"],
        ["x", "queues"],
        [{ "Bad Name": { concurrency: 1 } }, "queues.\"Bad Name\""],
        [{ ok: 3 }, "queues.ok"],
        [{ ok: { concurrency: 0 } }, "queues.ok.concurrency"],
        [{ ok: { concurrency: 1.5 } }, "queues.ok.concurrency"],
        [{ ok: { concurrency: 1025 } }, "queues.ok.concurrency"]
      ]
      for (const [queues, field] of cases) {
        const error = yield* Effect.flip(Effect.scoped(Layer.build(NodeRuntime.layerTest({ queues: queues as never }))))
        expect(error, JSON.stringify(queues)).toMatchObject({ _tag: "@baton/node/NodeRuntimeError", reason: "invalid_options", field })
      }
    }))
})
