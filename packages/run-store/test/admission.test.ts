/**
 * Checks 1–9: round trip, identifiers, state, error codes, corrupt rows, clocks, inert inputs.
 */
import * as RunStore from "@baton/run-store/RunStore"
import * as TestRunStore from "@baton/run-store/TestRunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { A, B, ev, pending, running } from "./support/stack.js"

const run = <X, E>(effect: Effect.Effect<X, E, RunStore.RunStore | SqlClient.SqlClient>) =>
  Effect.provide(effect, TestRunStore.layerWithDatabase)

/** Every row of `flows_runs`, for "nothing written" assertions. */
const snapshotTable = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT * FROM flows_runs ORDER BY run_id`)

const expectInvalid = <X>(effect: Effect.Effect<X, RunStore.RunStoreError>, method: string) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    expect(error.code).toBe("invalid_run")
    expect(error.method).toBe(method)
    expect(error.message.startsWith(`invalid_run: RunStore.${method}: `)).toBe(true)
    return error
  })

describe("admission and errors", () => {
  it.effect("1: a created run reads back byte-identical", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r1", '{"b":1, "a":[2]}')
      expect(yield* store.get("r1")).toEqual({
        runId: "r1",
        status: "pending",
        createdAtMs: 0,
        startedAtMs: null,
        finishedAtMs: null,
        owner: null,
        heartbeatAtMs: null,
        claim: null,
        claimedAtMs: null,
        parentRunId: null,
        cancelRequestedAtMs: null,
        lineageId: null,
        roundOrdinal: null,
        stateJson: '{"b":1, "a":[2]}'
      })
    })))

  it.effect("2: identifiers must be durable text and not companion ids", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      for (const bad of ["", "r-\uD800", "r-\uDC00", "a\u0000b", "x".repeat(1025), 42, "flows.companion/run-store/00"]) {
        yield* expectInvalid(store.create(bad as string, "{}"), "create")
      }
      expect(yield* snapshotTable).toEqual([])
      for (const good of ["r-\uFFFD", "r-😀", "x".repeat(1024)]) {
        yield* store.create(good, "{}")
        expect((yield* store.get(good)).runId).toBe(good)
      }
    })))

  it.effect("3: state must be admissible JSON text; the error never quotes it", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const nested = (n: number) => "[".repeat(n) + "]".repeat(n)
      const zeros = (n: number) => `[${new Array(n).fill("0").join(",")}]`
      const bad: Array<unknown> = [
        "not-json",
        "",
        null,
        { value: true },
        '{"v":"\uD800"}',
        '{"x":1e400}',
        nested(130),
        zeros(100_001),
        '{"v":"a\\u0000b"}',
        '{"v":"\\ud800"}',
        '{"\\u0000":1}'
      ]
      for (const [i, state] of bad.entries()) {
        const error = yield* expectInvalid(store.create(`bad-${i}`, state as string), "create")
        const cause = JSON.stringify(error.cause)
        if (typeof state === "string" && state.length > 2) expect(cause.includes(state)).toBe(false)
        expect(cause.includes("not-json")).toBe(false)
      }
      expect(yield* snapshotTable).toEqual([])
      yield* store.create("deep", nested(129))
      yield* store.create("wide", zeros(99_999))
      expect((yield* store.get("deep")).stateJson).toBe(nested(129))
    })))

  it.effect("4: database refusals map to constraint, not_found_row and persistence_failed", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      yield* store.create("r", "{}")
      expect((yield* Effect.flip(store.create("r", "{}"))).code).toBe("constraint")
      expect((yield* Effect.flip(store.create("child", "{}", { parentRunId: "nope" }))).code).toBe("constraint")
      // A run cannot be its own parent: refused before the write, nothing stored.
      const before = yield* snapshotTable
      const self = yield* expectInvalid(store.create("self", "{}", { parentRunId: "self" }), "create")
      expect(self.message).toContain("options.parentRunId must name another run")
      expect(yield* snapshotTable).toEqual(before)
      yield* store.create("l1", "{}", { lineageId: "L", roundOrdinal: 1 })
      expect((yield* Effect.flip(store.create("l1b", "{}", { lineageId: "L", roundOrdinal: 1 }))).code).toBe("constraint")
      const missing = yield* Effect.flip(store.get("missing"))
      expect([missing.code, missing.cause]).toEqual(["not_found_row", { runId: "missing" }])
      yield* sql`PRAGMA foreign_keys = OFF`
      yield* sql`DROP TABLE flows_runs`
      const created = yield* Effect.flip(store.create("x", "{}"))
      expect(created.code).toBe("persistence_failed")
      expect(JSON.stringify(created.cause)).not.toContain("no such table")
      expect((yield* Effect.flip(store.get("x"))).code).toBe("persistence_failed")
    })))

  const corruptions: ReadonlyArray<readonly [string, string]> = [
    ["created_at_ms text", "UPDATE flows_runs SET created_at_ms = 'bad'"],
    ["owner without nonce", "UPDATE flows_runs SET owner_host_id = 'h', owner_pid = 1, owner_nonce = NULL"],
    ["heartbeat on pending", "UPDATE flows_runs SET heartbeat_at_ms = 5"],
    ["running without owner", "UPDATE flows_runs SET status = 'running'"],
    ["claim host alone", "UPDATE flows_runs SET claim_host_id = 'h'"],
    ["claimed_at alone", "UPDATE flows_runs SET claimed_at_ms = 5"],
    ["claim triple without time", "UPDATE flows_runs SET claim_host_id = 'h', claim_pid = 1, claim_nonce = 'n'"],
    ["state not json", "UPDATE flows_runs SET state_json = 'not-json'"]
  ]
  for (const [name, statement] of corruptions) {
    it.effect(`5: a corrupt row (${name}) fails decode_failed without state text`, () =>
      run(Effect.gen(function*() {
        const store = yield* RunStore.RunStore
        const sql = yield* SqlClient.SqlClient
        yield* store.create("r", '{"secret":"s3cr3t"}')
        yield* sql`PRAGMA ignore_check_constraints = ON`
        yield* sql.unsafe(statement)
        yield* sql`PRAGMA ignore_check_constraints = OFF`
        const error = yield* Effect.flip(store.get("r"))
        expect(error.code).toBe("decode_failed")
        expect(JSON.stringify(error.cause)).not.toContain("s3cr3t")
        expect(JSON.stringify(error.cause)).not.toContain("not-json")
      })))
  }

  it.effect("6: fractional clock readings are floored", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* TestClock.setTime(10.5)
      yield* store.create("r", "{}")
      expect((yield* store.get("r")).createdAtMs).toBe(10)
      expect(yield* store.claim("r", pending, A, 10)).toEqual({ _tag: "Claimed", claimedAtMs: 10 })
      expect(yield* store.activate("r", A, 10, pending)).toEqual({ _tag: "Activated" })
      expect((yield* store.get("r")).startedAtMs).toBe(10)
      yield* TestClock.adjust(1)
      yield* store.transitionOwned("r", A, "completed")
      expect((yield* store.get("r")).finishedAtMs).toBe(11)
    })))

  it.effect("7: lease readings may lead the effect clock by at most 10 s", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      yield* store.create("s", "{}")
      expect(yield* store.claim("r", pending, A, 10_000)).toEqual({ _tag: "Claimed", claimedAtMs: 10_000 })
      const before = yield* snapshotTable
      const error = yield* expectInvalid(store.claim("s", pending, A, 10_001), "claim")
      expect(error.cause).toMatchObject({ field: "nowMs", nowMs: 10_001, clockMs: 0 })
      expect(yield* snapshotTable).toEqual(before)
      expect(yield* store.requestCancel("s", 10_000_000)).toEqual({ _tag: "CancelRequested", requestedAtMs: 10_000_000 })
      expect(yield* store.abandonClaim("r", A, 1e9)).toEqual({ _tag: "ClaimLost" })
      for (const call of [
        store.claimAndOwn("s", pending, A, 10_001),
        store.heartbeat("s", A, 10_001),
        store.reconfirm("s", A, 10_001),
        store.steal("s", running(B, 0), A, 10_001, ev(B, A, 10_001)),
        store.recoverClaim("r", A, 10_000, B, 10_001, ev(A, B, 10_001))
      ]) {
        const refused = yield* Effect.flip(call as Effect.Effect<unknown, RunStore.RunStoreError>)
        expect(refused.code).toBe("invalid_run")
        expect(refused.cause).toMatchObject({ field: "nowMs", nowMs: 10_001, clockMs: 0, detail: "effect clock" })
      }
    })))

  it.effect("15: skew edges: a reading 10 s ahead of the store clock is admitted and judged literally", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      for (const id of ["a", "b", "c"]) {
        yield* store.create(id, "{}")
        yield* store.claimAndOwn(id, pending, A, 0)
      }
      yield* TestClock.setTime(30_001)
      expect(yield* store.steal("a", running(A, 0), B, 40_001, ev(A, B, 40_001))).toEqual({
        _tag: "Claimed",
        claimedAtMs: 40_001
      })
      expect(yield* store.steal("b", running(A, 0), B, 20_001, ev(A, B, 20_001))).toEqual({ _tag: "HeartbeatFresh" })
      yield* expectInvalid(store.steal("c", running(A, 0), B, 40_002, ev(A, B, 40_002)), "steal")
    })))

  it.effect("46 (SQLite): Effect's Clock is the reference: 60 s ahead refused, 60 s behind admitted", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* TestClock.setTime(100_000)
      yield* store.create("r", "{}")
      const error = yield* expectInvalid(store.claimAndOwn("r", pending, A, 160_000), "claimAndOwn")
      expect(error.cause).toMatchObject({ field: "nowMs", nowMs: 160_000, clockMs: 100_000, detail: "effect clock" })
      expect((yield* store.get("r")).status).toBe("pending")
      expect(yield* store.claimAndOwn("r", pending, A, 40_000)).toEqual({ _tag: "Activated" })
      expect(yield* store.heartbeat("r", A, 30_000)).toEqual({ _tag: "Updated", heartbeatAtMs: 40_000 })
    })))

  it.effect("8: inputs are read inert; a RunRow is accepted as a snapshot", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      let reads = 0
      const getter = {
        get status() {
          reads++
          return "pending"
        },
        owner: null,
        heartbeatAtMs: null
      }
      const throwingProxy = new Proxy({}, {
        ownKeys() {
          throw new Error("trap")
        }
      })
      class Snapshot {
        status = "pending"
        owner = null
        heartbeatAtMs = null
      }
      const inherited = Object.create({ status: "pending", owner: null, heartbeatAtMs: null })
      const badSnapshots: Array<unknown> = [getter, throwingProxy, new Snapshot(), inherited, { owner: null, heartbeatAtMs: null }]
      const before = yield* snapshotTable
      for (const snapshot of badSnapshots) {
        yield* expectInvalid(store.claim("r", snapshot as RunStore.RunSnapshot, A, 0), "claim")
      }
      expect(reads).toBe(0)
      const hidden = { pid: 101, nonce: "a" }
      Object.defineProperty(hidden, "hostId", { value: "host-a", enumerable: false })
      for (const owner of [hidden, { ...A, extra: 1 }]) {
        yield* expectInvalid(store.claim("r", pending, owner as typeof A, 0), "claim")
      }
      yield* expectInvalid(
        store.steal("r", running(B, 0), A, 0, { ...ev(B, A, 0), extra: 1 } as ReturnType<typeof ev>),
        "steal"
      )
      for (const guard of [null, new Date(), { cancelRequested: "typo" }, { cancelRequested: "absent", x: 1 }]) {
        yield* expectInvalid(store.transitionOwned("r", A, "completed", undefined, guard as RunStore.TransitionGuard), "transitionOwned")
      }
      expect(yield* snapshotTable).toEqual(before)

      const row = yield* store.get("r")
      expect(yield* store.claim("r", row, A, 0)).toEqual({ _tag: "Claimed", claimedAtMs: 0 })
      expect(yield* store.activate("r", A, 0, row)).toEqual({ _tag: "Activated" })
      yield* store.create("s", "{}")
      expect(yield* store.claimAndOwn("s", yield* store.get("s"), B, 0)).toEqual({ _tag: "Activated" })
      yield* TestClock.setTime(31_000)
      expect(yield* store.steal("s", yield* store.get("s"), A, 31_000, ev(B, A, 31_000))).toEqual({
        _tag: "Claimed",
        claimedAtMs: 31_000
      })
    })))

  it.effect("9: snapshots must satisfy the run invariants", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      for (const snapshot of [
        { status: "running", owner: null, heartbeatAtMs: null },
        { status: "pending", owner: A, heartbeatAtMs: null },
        { status: "pending", owner: null, heartbeatAtMs: -1 },
        { status: "unknown", owner: null, heartbeatAtMs: null }
      ]) {
        yield* expectInvalid(store.claim("r", snapshot as RunStore.RunSnapshot, A, 0), "claim")
      }
    })))

  it.effect("makeNoop answers per method", () =>
    Effect.gen(function*() {
      const noop = RunStore.makeNoop()
      const failure = yield* Effect.flip(noop.get("r"))
      expect([failure.code, failure.cause]).toEqual(["persistence_failed", "get"])
      expect(yield* noop.heartbeat("r", A, 0)).toEqual({ _tag: "NotFound" })
      expect(yield* noop.activate("r", A, 0, pending)).toEqual({ _tag: "ClaimLost" })
      expect(yield* RunStore.makeNoop({ acknowledgeCancel: () => Effect.succeed(true) }).acknowledgeCancel("r", A, 0)).toBe(
        true
      )
    }))
})
