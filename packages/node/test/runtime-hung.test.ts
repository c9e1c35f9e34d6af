/**
 * node.md check 28 (hung owners, 3.2): a same-host owner that is SIGSTOPped keeps its run from a
 * default host however old its lease, and from a host with `takeOverHungOwnersAfter: "60 seconds"`
 * until the lease is 60 s old by that host's clock; then that host takes it over, journaled with
 * `lease-expired` evidence (the pid is alive, so `same-host-pid-dead` would be false).
 * The hosts run in this process with wall clocks set ahead (timers stay live), so the lease ages
 * without a real 60 s wait; on SQLite a host's own Clock is also the run store's reference.
 */
import * as Control from "@baton/control/Control"
import * as RunStore from "@baton/run-store/RunStore"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as IndexDir from "../src/example/IndexDir.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { tempDir } from "./cli-support.js"
import * as Support from "./example-support.js"
import { stopOutsideWrite } from "./fixtures/sqliteLock.js"

const live = Clock.make()
/** Wall readings `offset.ms` ahead of the live clock; monotonic time and timers stay live. */
const ahead = (offset: { ms: number }): Clock.Clock => ({
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => live.unsafeCurrentTimeMillis() + offset.ms,
  currentTimeMillis: Effect.sync(() => live.unsafeCurrentTimeMillis() + offset.ms),
  unsafeCurrentTimeNanos: () => live.unsafeCurrentTimeNanos(),
  currentTimeNanos: live.currentTimeNanos,
  sleep: (duration) => live.sleep(duration)
})

describe("hung same-host owner", () => {
  it("is taken over only with takeOverHungOwnersAfter, once its lease is that old", async () => {
    const root = Support.makeTree(60)
    const dir = fs.mkdtempSync(path.join(tempDir(), "hung-"))
    const db = path.join(dir, "baton.db")
    const runtime = Support.clientRuntime(db)
    const first = Support.spawnWorker(db, "w1", path.join(dir, "trace.txt"))
    const host = (offset: { ms: number }, extra: { readonly takeOverHungOwnersAfter?: "60 seconds" } = {}) =>
      ManagedRuntime.make(NodeRuntime.layer({
        filename: db,
        flows: [IndexDir.flow],
        migrations: [IndexDir.migrations],
        // Sweeps come from sweepNow; the poller's own ticks see the same clock and must agree.
        pollInterval: "10 seconds",
        shutdownGrace: "5 seconds",
        drainTimeout: "1 second",
        ...(extra.takeOverHungOwnersAfter === undefined ? {} : { takeOverHungOwnersAfter: extra.takeOverHungOwnersAfter })
      }).pipe(Layer.provide(Layer.setClock(ahead(offset)))))
    try {
      await runtime.runPromise(Effect.void)
      const pid = await first.ready
      const runId = await runtime.runPromise(Support.launch({ root, batchFiles: 20, holdAt: { batch: 2, files: 5 } }))
      await runtime.runPromise(Support.until(
        Effect.map(Support.history(runId), (h) => h.own.some((e) => e.eventType === "index.held")),
        120_000,
        200
      ))
      await stopOutsideWrite(first.child, db)
      const stamp = (await runtime.runPromise(Effect.flatMap(RunStore.RunStore, (s) => s.get(runId)))).heartbeatAtMs!
      const ownerPid = () => runtime.runPromise(Support.ownerPid(runId))
      const ageTo = (offset: { ms: number }, ms: number) => (offset.ms = stamp + ms - Date.now())

      // A default host: the lease 10 minutes old by its clock, the pid alive: never taken over.
      const plainOffset = { ms: 0 }
      const plain = host(plainOffset)
      try {
        await plain.runPromise(Effect.void)
        ageTo(plainOffset, 600_000)
        await plain.runPromise(Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow))
        expect(await ownerPid()).toBe(pid)
      } finally {
        await plain.dispose()
      }

      // Opted in at 60 s: stale (45 s) is not enough; 61 s is.
      const hungOffset = { ms: 0 }
      const opted = host(hungOffset, { takeOverHungOwnersAfter: "60 seconds" })
      try {
        const self = await opted.runPromise(Effect.map(NodeRuntime.NodeHost, (h) => h.identity))
        ageTo(hungOffset, 45_000)
        await opted.runPromise(Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow))
        expect(await ownerPid()).toBe(pid)
        ageTo(hungOffset, 61_000)
        await opted.runPromise(Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow))
        expect(await ownerPid()).toBe(self.pid)
        const { facts, own } = await runtime.runPromise(Support.history(runId))
        const takeover = own.find((e) => e.eventType === "baton.run.taken-over")?.payload as {
          from: { pid: number }
          evidence: string
          leaseAgeMs: number
        }
        // The pid is alive (stopped): the takeover rests on the lease's age, not on a dead pid.
        expect(takeover).toMatchObject({ from: { pid }, evidence: "lease-expired" })
        expect(takeover.leaseAgeMs).toBeGreaterThanOrEqual(60_000)
        expect(facts.filter((f) => f.eventType === "flows.consensus.stolen").map((f) => (f.payload as { owner: { pid: number } }).owner.pid))
          .toEqual([self.pid])
        // The hung owner's run completes under the new owner, every file once.
        await runtime.runPromise(Support.until(
          Effect.map(Effect.flatMap(Control.Control, (c) => c.getRun(runId)), (s) => s.status === "completed"),
          60_000,
          200
        ))
        expect((await runtime.runPromise(Support.rows(runId))).length).toBe(60)
      } finally {
        await opted.dispose()
      }
    } finally {
      first.child.kill("SIGKILL")
      await runtime.dispose()
    }
  }, 120_000)
})
