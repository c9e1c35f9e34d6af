/**
 * SQL runtime ownership: fences across runtimes, dead-owner evidence, parkedBy, incarnations and nonces
 * (§19 checks 23, 27, 28, 50, 51, 53). Two runtimes with distinct owners share one database.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as ControlRuntime from "../src/ControlRuntime.js"
import * as SqlControlRuntime from "../src/SqlControlRuntime.js"
import { launchF } from "./fixtures/runtimeContract.js"
import { countRows } from "./fixtures/runtimeRows.js"
import { defaultFlows, sqliteRuntime } from "./fixtures/runtimeSupport.js"

const runtime = (options: SqlControlRuntime.Options) => SqlControlRuntime.make({ flows: defaultFlows, ...options })
const alive = (answer: boolean) => () => Effect.succeed(answer)
const P = { hostId: "h", pid: 10, nonce: "p" }
const Q = { hostId: "h", pid: 20, nonce: "q" }

const launchOn = (rt: ControlRuntime.Service, input: unknown = { a: 1 }) =>
  launchF(input).pipe(Effect.provideService(ControlRuntime.ControlRuntime, rt))

type Env = SqlClient.SqlClient | DurableWriter.DurableWriter | RunStore.RunStore | ControlRuntime.ControlRuntime
const test = (title: string, body: Effect.Effect<void, unknown, Env>) =>
  it.effect(title, () => Effect.provide(body, sqliteRuntime()))

const rowOwner = (runId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ status: string; owner_pid: number | null; owner_nonce: string | null; waiting_reason: string | null }>`
      SELECT status, owner_pid, owner_nonce, waiting_reason FROM flows_runs WHERE run_id = ${runId}`
    return rows[0]!
  })

describe("SqlControlRuntime ownership", () => {
  test("23: a stale fence loses to the resumer's; the old process cannot take the fence back", Effect.gen(function*() {
    const a = yield* runtime({ owner: P })
    const b = yield* runtime({ owner: { ...P, pid: 11 } })
    yield* launchOn(a)
    const oldFence = yield* a.claimFence("run-1")
    yield* a.park("run-1", oldFence, { reason: "event", token: "T" })
    yield* b.resume("run-1")
    const newFence = yield* b.claimFence("run-1")
    expect(yield* Effect.flip(a.writeStatus("run-1", oldFence, "running"))).toMatchObject({ _tag: "ClaimLost" })
    expect((yield* b.writeStatus("run-1", newFence, "running")).status).toBe("running")
    expect(yield* Effect.flip(a.claimFence("run-1"))).toMatchObject({ _tag: "ClaimLost" })
    expect((yield* rowOwner("run-1")).owner_pid).toBe(11)
  }))

  test("27: a running owner is taken over only when dead and its lease is stale", Effect.gen(function*() {
    const owner = yield* runtime({ owner: { hostId: "mac", pid: 101, nonce: "o" } })
    yield* launchOn(owner)
    yield* owner.writeStatus("run-1", yield* owner.claimFence("run-1"), "running")
    const blind = yield* runtime({ owner: { hostId: "mac", pid: 102, nonce: "s" } })
    expect(yield* Effect.flip(blind.resume("run-1"))).toMatchObject({ _tag: "ClaimLost" })
    const believer = yield* runtime({ owner: { hostId: "mac", pid: 102, nonce: "s" }, isAlive: alive(true) })
    expect(yield* Effect.flip(believer.resume("run-1"))).toMatchObject({ _tag: "ClaimLost" })
    const successor = yield* runtime({ owner: { hostId: "mac", pid: 102, nonce: "s" }, isAlive: alive(false) })
    expect(yield* Effect.flip(successor.resume("run-1"))).toMatchObject({ _tag: "ClaimLost" })
    yield* TestClock.adjust("31 seconds")
    const taken = yield* successor.resume("run-1")
    expect(taken.status).toBe("accepted")
    expect(JSON.parse(taken.ownerId!)).toMatchObject({ hostId: "mac", pid: 102 })
    expect(yield* Effect.flip(owner.claimFence("run-1"))).toMatchObject({ _tag: "ClaimLost" })
  }))

  test("28: a park by a live host is refused naming it; by a dead host on this host it is taken over", Effect.gen(function*() {
    const p = yield* runtime({ owner: P })
    yield* launchOn(p)
    yield* p.park("run-1", yield* p.claimFence("run-1"), { reason: "event", token: "T" })
    const q = yield* runtime({ owner: Q, isAlive: alive(true) })
    const refused = yield* Effect.flip(q.resume("run-1", { scope: "launched" }))
    expect(refused).toMatchObject({ _tag: "ClaimLost", parkedBy: { hostId: "h", pid: 10 } })
    expect((yield* rowOwner("run-1")).status).toBe("suspended")
    // Another host's park is handed off even when the liveness check says dead.
    const remote = yield* runtime({ owner: { hostId: "other", pid: 20, nonce: "r" }, isAlive: alive(false) })
    expect(yield* Effect.flip(remote.resume("run-1", { scope: "launched" }))).toMatchObject({
      _tag: "ClaimLost",
      parkedBy: { hostId: "h", pid: 10 }
    })
    const successor = yield* runtime({ owner: Q, isAlive: alive(false) })
    const taken = yield* successor.resume("run-1", { scope: "launched" })
    expect(taken.status).toBe("accepted")
    expect(taken.parkedBy).toBeUndefined()
    expect(JSON.parse(taken.ownerId!)).toMatchObject({ hostId: "h", pid: 20 })
    expect((yield* rowOwner("run-1")).waiting_reason).toBeNull()
    // The parking process itself resumes its own park.
    yield* successor.park("run-1", yield* successor.claimFence("run-1"), { reason: "event", token: "T" })
    expect((yield* successor.resume("run-1", { scope: "launched" })).status).toBe("accepted")
  }))

  test("29: scope launched refuses engine-created runs", Effect.gen(function*() {
    const p = yield* runtime({ owner: P })
    yield* launchOn(p)
    yield* p.releasePending("run-1", yield* p.claimFence("run-1"))
    const sql = yield* SqlClient.SqlClient
    yield* sql`DELETE FROM control_runs WHERE run_id = 'run-1'`
    expect(yield* Effect.flip(p.resume("run-1", { scope: "launched" }))).toMatchObject({ _tag: "ClaimLost" })
    expect((yield* p.resume("run-1")).status).toBe("accepted")
  }))

  test("50: another incarnation with the same host and pid never joins; it takes over only a dead, stale owner", Effect.gen(function*() {
    const p = yield* runtime({ owner: { hostId: "h", pid: 7, nonce: "x" }, incarnation: "i1" })
    yield* launchOn(p)
    const pFence = yield* p.claimFence("run-1")
    expect(JSON.parse(pFence).nonce).toMatch(/^i1\./)
    const q = yield* runtime({ owner: { hostId: "h", pid: 7, nonce: "y" }, incarnation: "i2", isAlive: alive(false) })
    expect(yield* Effect.flip(q.resume("run-1"))).toMatchObject({ _tag: "ClaimLost" })
    expect(yield* Effect.flip(q.claimFence("run-1"))).toMatchObject({ _tag: "ClaimLost" })
    expect(yield* Effect.flip(q.interrupt("run-1"))).toMatchObject({ _tag: "ClaimLost" })
    yield* TestClock.adjust("31 seconds")
    const taken = yield* q.resume("run-1")
    expect(JSON.parse(taken.ownerId!).nonce).toMatch(/^i2\./)
    expect(yield* Effect.flip(p.writeStatus("run-1", pFence, "running"))).toMatchObject({ _tag: "ClaimLost" })
    // Without incarnations the same host and pid join (reference behaviour).
    const r1 = yield* runtime({ owner: { hostId: "g", pid: 7, nonce: "x" } })
    const r2 = yield* runtime({ owner: { hostId: "g", pid: 7, nonce: "y" } })
    yield* launchOn(r1, { b: 1 })
    expect(yield* r2.claimFence("run-2")).toBe(yield* r1.claimFence("run-2"))
  }))

  test("51: nonces carry the incarnation; a bad mintNonce fails before anything is written", Effect.gen(function*() {
    for (const [i, nonce] of ["x", "", "i1.\uD800"].entries()) {
      const bad = yield* runtime({ incarnation: "i1", mintNonce: () => nonce })
      const rt = ControlRuntime.ControlRuntime
      const error = yield* Effect.flip(launchF({ n: i }).pipe(Effect.provideService(rt, bad)))
      expect(error).toMatchObject({ _tag: "PersistenceError", operation: "mint a claim nonce" })
    }
    const throwing = yield* runtime({ mintNonce: () => { throw new Error("boom") } })
    expect(yield* Effect.flip(launchF().pipe(Effect.provideService(ControlRuntime.ControlRuntime, throwing))))
      .toMatchObject({ operation: "mint a claim nonce" })
    expect(yield* countRows("flows_runs")).toBe(0)
    expect(yield* countRows("control_runs")).toBe(0)
    const bad = yield* Effect.flip(runtime({ incarnation: "" }))
    expect(bad).toMatchObject({ _tag: "PersistenceError", operation: "configure the runtime" })
  }))

  test("53: park is fenced, stores canonical request JSON and rolls back with its transaction", Effect.gen(function*() {
    const p = yield* runtime({ owner: P })
    const q = yield* runtime({ owner: Q })
    yield* launchOn(p)
    const fence = yield* p.claimFence("run-1")
    expect(yield* Effect.flip(q.park("run-1", JSON.stringify(Q), { reason: "event", token: "T" })))
      .toMatchObject({ _tag: "ClaimLost" })
    const writer = yield* DurableWriter.DurableWriter
    const failed = yield* Effect.flip(writer.write(
      p.park("run-1", fence, { reason: "event", token: "T", request: { q: 1 } }).pipe(Effect.zipRight(Effect.fail("journal failed" as const))),
      { key: "run-1" }
    ))
    expect(failed).toBe("journal failed")
    expect((yield* rowOwner("run-1")).status).toBe("running")
    const parked = yield* p.park("run-1", fence, { reason: "event", token: "T", request: { z: 1, a: [2] } })
    expect(parked.parkedBy).toBe(fence)
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ waiting_request: string; waiting_token: string }>`SELECT waiting_request, waiting_token FROM flows_runs`
    expect(row).toEqual({ waiting_request: "{\"a\":[2],\"z\":1}", waiting_token: "T" })
    expect(yield* Effect.flip(p.park("run-1", fence, { reason: "event", token: "T" }))).toMatchObject({ _tag: "ClaimLost" })
    const store = yield* RunStore.RunStore
    expect((yield* store.get("run-1")).status).toBe("suspended")
  }))

  test("35: a failed settlement keeps the fence; a retry settles cancelled", Effect.gen(function*() {
    const p = yield* runtime({ owner: P })
    yield* launchOn(p)
    const fence = yield* p.claimFence("run-1")
    const sql = yield* SqlClient.SqlClient
    yield* sql`PRAGMA query_only = 1`
    const error = yield* Effect.flip(p.interrupt("run-1"))
    yield* sql`PRAGMA query_only = 0`
    expect(error).toMatchObject({ _tag: "PersistenceError", operation: "settle an interrupted run" })
    expect(yield* p.claimFence("run-1")).toBe(fence)
    expect((yield* p.interrupt("run-1")).status).toBe("cancelled")
  }))
})
