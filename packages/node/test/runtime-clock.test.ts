/**
 * B-007 at the host (node.md 4.4, check 12): when this host's wall clock moves back, its beats
 * stop extending the stored lease, the heartbeat loop lapses on the monotonic clock, and the
 * drive ends `lease-lost`, interrupting the handler and releasing the run
 * (`baton.run.released { reason: "lease-lapsed" }`) so no peer has to wait for staleness. A peer
 * with another host id cannot steal the run before the lease is stale, then drives it; the host
 * whose clock is behind claims nothing, and none of its step completions commits after the
 * peer's activation.
 */
import { describe, expect, it } from "@effect/vitest"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import type * as Migrations from "@baton/database/Migrations"
import * as Companion from "@baton/journal/Companion"
import * as Journal from "@baton/journal/Journal"
import type * as OwnerId from "@baton/journal/OwnerId"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as Ownership from "@baton/run-store/Ownership"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Chunk, Clock, Effect, Fiber, Layer, ManagedRuntime, Schema, Stream } from "effect"
import * as Flow from "../src/Flow.js"
import * as HostIdentity from "../src/HostIdentity.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Run from "../src/Run.js"
import * as Step from "../src/Step.js"
import { tempDb, waitFor } from "./fixtures/runtimeProcesses.js"
import { awaitStatus, launch } from "./fixtures/runtimeSupport.js"

const skew = { ms: 0 }
const live = Clock.make()
/** Wall readings follow `skew`; monotonic time and timers stay the live clock's. */
const skewed: Clock.Clock = {
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => live.unsafeCurrentTimeMillis() - skew.ms,
  currentTimeMillis: Effect.sync(() => live.unsafeCurrentTimeMillis() - skew.ms),
  unsafeCurrentTimeNanos: () => live.unsafeCurrentTimeNanos(),
  currentTimeNanos: live.currentTimeNanos,
  sleep: (duration) => live.sleep(duration)
}

const hold = Flow.make({
  id: "clock.hold",
  description: "holds",
  version: "1",
  input: Schema.Unknown,
  handler: () => Step.run("hold", Effect.as(Effect.sleep("120 seconds"), 1))
})

describe("runtime: wall clock moving back (B-007)", () => {
  it.live("the lease lapses within the write tolerance and the run is released lease-lapsed", () =>
    Effect.gen(function*() {
      const host = yield* NodeRuntime.NodeHost
      const lapsed = yield* Effect.fork(
        Stream.runCollect(host.events.pipe(Stream.filter((e) => e._tag === "lapsed"), Stream.take(1)))
      )
      const runId = yield* launch("clock.hold", null)
      yield* awaitStatus(runId, ["running"])
      yield* Effect.sleep("1500 millis")
      skew.ms = 60_000
      const events = yield* Fiber.join(lapsed).pipe(Effect.timeout("40 seconds"))
      expect(Chunk.toReadonlyArray(events)).toEqual([{ _tag: "lapsed", runId }])
      const journal = yield* Effect.flatMap(Journal.Journal, (j) => j.entries({ runId: runId as never, limit: 100 }))
      const released = journal.entries.find((e) => e.eventType === "baton.run.released")
      expect(released?.payload).toEqual({ reason: "lease-lapsed", drive: 1 })
      const attempts = yield* Effect.flatMap(AttemptStore.AttemptStore, (s) => s.list(runId))
      const first = attempts.find((a) => (a.meta as { name: string }).name === "hold" && a.attempt === 0)
      expect(first?.state).toBe("interrupted")
      skew.ms = 0
    }).pipe(
      Effect.provide(NodeRuntime.layerTest({ flows: [hold], pollInterval: "10 seconds", shutdownGrace: "5 seconds", drainTimeout: "1 second" })),
      Effect.withClock(skewed)
    ), 90_000)
})

/** A clock whose wall readings are the live clock's minus `offset.ms`; timers stay live. */
const behindBy = (offset: { ms: number }): Clock.Clock => ({
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => live.unsafeCurrentTimeMillis() - offset.ms,
  currentTimeMillis: Effect.sync(() => live.unsafeCurrentTimeMillis() - offset.ms),
  unsafeCurrentTimeNanos: () => live.unsafeCurrentTimeNanos(),
  currentTimeNanos: live.currentTimeNanos,
  sleep: (duration) => live.sleep(duration)
})

const rowsSet: Migrations.MigrationSet = {
  namespace: "clock-test",
  idOffset: 10_000,
  migrations: {
    "0001_rows": Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql`CREATE TABLE IF NOT EXISTS clock_rows (run_id TEXT NOT NULL, step TEXT NOT NULL, host_id TEXT NOT NULL)`)
  }
}

const count = 60
/** `count` steps of 500 ms, each committing one row with the driving host's id. */
const many = Flow.make({
  id: "clock.many",
  description: "many short steps that each commit a row naming their host",
  version: "1",
  input: Schema.Unknown,
  handler: () =>
    Effect.gen(function*() {
      const run = yield* Run.Run
      for (let i = 0; i < count; i++) {
        yield* Step.run(`s${String(i).padStart(2, "0")}`, Effect.as(Effect.sleep("500 millis"), i), {
          commit: (value) =>
            Effect.flatMap(SqlClient.SqlClient, (sql) =>
              sql`INSERT INTO clock_rows (run_id, step, host_id)
                  VALUES (${run.runId}, ${`s${String(value).padStart(2, "0")}`}, ${run.owner.hostId})`)
        })
      }
      return { steps: count }
    })
})

/** Held by the peer for the whole test: its fresh stamps are what the behind host compares with. */
const keep = Flow.make({
  id: "clock.keep",
  description: "holds until shutdown",
  version: "1",
  input: Schema.Unknown,
  handler: () => Step.run("keep", Effect.as(Effect.sleep("600 seconds"), 1))
})

describe("runtime: wall clock moving back, with a peer on another host id (B-007)", () => {
  it("the peer cannot steal before the lease is stale, then drives the run; the behind host claims nothing", async () => {
    const db = tempDb()
    const offset = { ms: 0 }
    const options = {
      filename: db.filename,
      flows: [many, keep],
      migrations: [rowsSet],
      pollInterval: "200 millis",
      shutdownGrace: "5 seconds",
      drainTimeout: "200 millis"
    } as const
    const a = ManagedRuntime.make(
      NodeRuntime.layer({ ...options, hostId: "clock-a" }).pipe(Layer.provide(Layer.setClock(behindBy(offset))))
    )
    const b = ManagedRuntime.make(NodeRuntime.layer({ ...options, hostId: "clock-b" }))
    try {
      const aEvents: Array<{ _tag: string; runId: string; reason?: string }> = []
      await a.runPromise(Effect.flatMap(NodeRuntime.NodeHost, (host) =>
        Effect.forkDaemon(Stream.runForEach(host.events, (e) => Effect.sync(() => aEvents.push(e))))))
      const getRun = (runId: string) => b.runPromise(Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getRun(runId)))
      const row = (runId: string) => b.runPromise(Effect.flatMap(RunStore.RunStore, (s) => s.get(runId)))
      const hostOf = (summary: { ownerId?: string | undefined }) =>
        summary.ownerId === undefined ? undefined : (JSON.parse(summary.ownerId) as OwnerId.OwnerId).hostId

      const kept = await b.runPromise(launch("clock.keep", null))
      expect(hostOf(await b.runPromise(awaitStatus(kept, ["running"])))).toBe("clock-b")
      const runId = await a.runPromise(launch("clock.many", null))
      expect(hostOf(await a.runPromise(awaitStatus(runId, ["running"])))).toBe("clock-a")
      await waitFor("a few of A's steps", async () => {
        const rows = await b.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ n: number }>`SELECT COUNT(*) AS n FROM clock_rows WHERE run_id = ${runId}`))
        return Number(rows[0]?.n) >= 3 ? true : undefined
      }, 30_000)

      // A's wall clock moves back 60 s; its monotonic clock and timers do not.
      offset.ms = 60_000
      const aReading = await a.runPromise(Clock.currentTimeMillis)
      expect(Date.now() - aReading).toBeGreaterThanOrEqual(59_000)
      await new Promise((r) => setTimeout(r, 2_500))
      const stamp = (await row(runId)).heartbeatAtMs!
      const aOwner = (await row(runId)).owner!
      expect(aOwner.hostId).toBe("clock-a")

      // B's steal attempts before S after A's last confirmed stamp answer fresh (while A still owns it).
      const identityB = await b.runPromise(Effect.map(NodeRuntime.NodeHost, (h) => h.identity))
      const attempts: Array<string> = []
      for (let i = 0; i < 4; i++) {
        const current = await row(runId)
        if (current.owner?.nonce !== aOwner.nonce || Date.now() >= stamp + 30_000) break
        // A's beats are answered with the unchanged stored stamp: not confirmed, not extended.
        expect(current.heartbeatAtMs).toBe(stamp)
        const viaControl = await b.runPromise(Effect.either(
          Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.resume(runId, { scope: "any" }))
        ))
        expect(viaControl._tag).toBe("Left")
        if (viaControl._tag === "Left") expect(viaControl.left).toMatchObject({ _tag: "ClaimLost", runId })
        const claimant = { ...HostIdentity.ownerOf(identityB), nonce: HostIdentity.mintNonce(identityB)() }
        const nowMs = Date.now()
        const stolen = await b.runPromise(Effect.flatMap(RunStore.RunStore, (s) =>
          s.steal(runId, current, claimant, nowMs, Ownership.evidenceFor(aOwner, claimant, nowMs))))
        expect(stolen._tag).toBe("HeartbeatFresh")
        await b.runPromise(Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow))
        expect(hostOf(await getRun(runId))).toBe("clock-a")
        attempts.push(`${((nowMs - stamp) / 1000).toFixed(1)} s`)
        await new Promise((r) => setTimeout(r, 3_000))
      }
      expect(attempts.length).toBeGreaterThanOrEqual(3)

      // A lapses and releases the run.
      await waitFor("A's lapse", async () => (aEvents.some((e) => e.runId === runId && e._tag === "lapsed") ? true : undefined), 30_000)
      console.log(`check 12: B's steal attempts at ${attempts.join(", ")} after A's last confirmed stamp answered fresh`)

      // B drives the run to completion while A, its clock behind, claims nothing.
      const done = await waitFor("completion", async () => {
        const s = await getRun(runId)
        return s.status === "completed" || s.status === "failed" ? s : undefined
      }, 60_000)
      expect(done.status).toBe("completed")
      const journal = (await b.runPromise(Effect.flatMap(Journal.Journal, (j) => j.entries({ runId: runId as never, limit: 1000 })))).entries
      expect(journal.find((e) => e.eventType === "baton.run.released")?.payload).toEqual({ reason: "lease-lapsed", drive: 1 })
      const drives = journal.filter((e) => e.eventType === "baton.run.driven").map((e) => e.payload as { drive: number; owner: { hostId: string } })
      expect(drives.map((d) => [d.drive, d.owner.hostId])).toEqual([[1, "clock-a"], [2, "clock-b"]])
      const lapsedAt = aEvents.findIndex((e) => e.runId === runId && e._tag === "lapsed")
      expect(aEvents.filter((e) => e._tag === "claimed").map((e) => e.runId)).toEqual([runId])
      expect(aEvents.slice(lapsedAt).filter((e) => e._tag === "claimed")).toEqual([])
      const ownerHost = (f: { payload: unknown }) => (f.payload as { owner: OwnerId.OwnerId }).owner.hostId
      const facts = (await b.runPromise(Companion.entries(Companion.runStore.stream, runId, { limit: 1000 }))).entries
      const activations = facts.filter((f) => f.eventType === "flows.consensus.activated")
      expect(activations.map(ownerHost)).toEqual(["clock-a", "clock-b"])
      const bActivated = activations[1]!.seq
      // A's last fact is its release, before B's activation; nothing of A's fence after it.
      expect(facts.filter((f) => ownerHost(f) === "clock-a").at(-1)?.eventType).toBe("flows.consensus.released")
      expect(facts.filter((f) => ownerHost(f) === "clock-a" && f.seq > bActivated)).toEqual([])

      // Every step's row exactly once. A step's row commits with its `baton.step.completed`
      // entry; A's all precede A's release, which B's claim (and so its activation) follows.
      const all = await b.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ step: string; host_id: string }>`SELECT step, host_id FROM clock_rows WHERE run_id = ${runId}`))
      expect(all.map((r) => r.step).sort()).toEqual(Array.from({ length: count }, (_, i) => `s${String(i).padStart(2, "0")}`))
      const byA = new Set(all.filter((r) => r.host_id === "clock-a").map((r) => r.step))
      expect(byA.size).toBeGreaterThan(0)
      expect(byA.size).toBeLessThan(count)
      const releasedSeq = journal.find((e) => e.eventType === "baton.run.released")!.seq
      const drive2Seq = journal.find((e) => e.eventType === "baton.run.driven" && (e.payload as { drive: number }).drive === 2)!.seq
      const completions = journal.filter((e) => e.eventType === "baton.step.completed")
      expect(completions.length).toBe(count)
      for (const entry of completions) {
        const step = (entry.payload as { step: string }).step
        if (byA.has(step)) expect(entry.seq).toBeLessThan(releasedSeq)
        else expect(entry.seq).toBeGreaterThan(drive2Seq)
      }
      console.log(`check 12: ${byA.size} steps completed by A before its lapse, ${count - byA.size} by B`)
    } finally {
      offset.ms = 0
      await a.dispose()
      await b.dispose()
    }
  }, 120_000)
})
