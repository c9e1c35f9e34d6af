/**
 * Adversarial probes of docs/run-store.md's guarantees, as a new user would write them.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as Consensus from "@baton/journal/Consensus"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as Heartbeat from "@baton/run-store/Heartbeat"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Effect, Fiber, Layer, Scope, TestClock } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import {
  A,
  B,
  C,
  type Env,
  ev,
  factEntries,
  facts,
  type MakeStack,
  ownedRun,
  pending,
  postgresStack,
  running,
  sqliteStack,
  stack
} from "./support/stack.js"

// Every test names its timeout: a run outside the workspace config (a package's own `vitest run`)
// would otherwise get vitest's 5 s. Sized for a loaded 2-core machine: a probe is one scenario
// (well under a second idle); a walk or race is bounded by its iteration count, never by time.
const probeTimeout = 60_000
const walkTimeout = 240_000

/**
 * Steps of the random ownership walk. Every outcome it checks for is reached by step ~300; a
 * step costs ~25 ms on PostgreSQL under load, so the walk fits `walkTimeout` several times over.
 */
const modelSteps = 1000

const probes = (makeStack: MakeStack) => {
  const run = <X, E>(effect: Effect.Effect<X, E, any>) => Effect.provide(effect, makeStack())
  const owned = (id: string, owner = A) => ownedRun(id, owner)
  /** Every table a refused call must leave alone. */
  const everything = Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`SELECT * FROM flows_runs ORDER BY run_id`,
      sql`SELECT * FROM flows_attempts ORDER BY run_id, step_key_digest, attempt`,
      sql`SELECT * FROM flows_journal_heads ORDER BY run_id`,
      sql`SELECT * FROM flows_run_changes ORDER BY run_id`
    ]))

  it.effect("steal naming the claimant itself is no evidence: the owner stays fenced in and the run stays takeable", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      const consensus = yield* Consensus.Consensus
      yield* TestClock.setTime(31_000)
      const before = yield* everything
      // The recorded owner "proves" itself dead: refused, nothing written.
      expect(yield* store.steal("r", running(A, 0), A, 31_000, ev(A, A, 31_000))).toEqual({ _tag: "LivenessUnconfirmed" })
      expect(yield* store.steal("r", running(A, 0), A, 31_000, { expectedOwner: A, checkedAtMs: 31_000, kind: "lease-expired" }))
        .toEqual({ _tag: "LivenessUnconfirmed" })
      expect(yield* everything).toEqual(before)
      expect(yield* store.abandonClaim("r", A, 31_000)).toEqual({ _tag: "ClaimLost" })
      // Row and strategy still agree that A owns the run ...
      expect((yield* store.get("r")).owner).toEqual(A)
      yield* consensus.guard("r", A)
      expect(yield* store.heartbeat("r", A, 31_000)).toEqual({ _tag: "Updated", heartbeatAtMs: 31_000 })
      // ... and once it is stale again a peer with evidence takes it over.
      yield* TestClock.setTime(62_000)
      expect(yield* store.claimAndOwn("r", running(A, 31_000), B, 62_000, ev(A, B, 62_000))).toEqual({ _tag: "Activated" })
      expect(yield* store.transitionOwned("r", A, "completed")).toEqual({ _tag: "FenceLost" })
      expect(yield* facts("r")).toEqual(["claimed", "activated", "stolen", "activated"])
    })), probeTimeout)

  it.effect("evidence must name the recorded owner on all three fields; a near miss writes nothing", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      yield* TestClock.setTime(31_000)
      const before = yield* everything
      for (const ghost of [{ ...A, nonce: "a-old" }, { ...A, pid: 102 }, { ...A, hostId: "host-b" }]) {
        const evidence = { expectedOwner: ghost, checkedAtMs: 31_000, kind: "lease-expired" } as const
        expect(yield* store.steal("r", running(A, 0), C, 31_000, evidence)).toEqual({ _tag: "LivenessUnconfirmed" })
        expect(yield* store.claimAndOwn("r", running(A, 0), C, 31_000, evidence)).toEqual({ _tag: "EvidenceRequired" })
      }
      // A snapshot one millisecond off is a lost compare-and-swap even with perfect evidence.
      expect((yield* store.steal("r", running(A, 1), C, 31_000, ev(A, C, 31_000)))._tag).not.toBe("Claimed")
      expect((yield* store.claimAndOwn("r", running(A, 1), C, 31_000, ev(A, C, 31_000)))._tag).not.toBe("Activated")
      expect(yield* everything).toEqual(before)
    })), probeTimeout)

  it.effect("recoverClaim refuses a wrong generation, a wrong claimant and evidence about anyone else", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      yield* TestClock.setTime(31_000)
      expect(yield* store.steal("r", running(A, 0), B, 31_000, ev(A, B, 31_000))).toEqual({ _tag: "Claimed", claimedAtMs: 31_000 })
      yield* TestClock.setTime(61_001)
      const now = 61_001
      const before = yield* everything
      expect(yield* store.recoverClaim("r", B, 31_001, C, now, ev(B, C, now))).toEqual({ _tag: "ClaimChanged" })
      expect(yield* store.recoverClaim("r", { ...B, nonce: "b2" }, 31_000, C, now, ev({ ...B, nonce: "b2" }, C, now)))
        .toEqual({ _tag: "ClaimChanged" })
      // Evidence about the owner (A), not the stale claimant (B).
      expect(yield* store.recoverClaim("r", B, 31_000, C, now, ev(A, C, now))).toEqual({ _tag: "LivenessUnconfirmed" })
      // Host relation of the kind: B is on host-a, C on host-b.
      expect(yield* store.recoverClaim("r", B, 31_000, C, now, { expectedOwner: B, checkedAtMs: now, kind: "same-host-pid-dead" }))
        .toEqual({ _tag: "LivenessUnconfirmed" })
      expect(yield* store.recoverClaim("r", B, 31_000, A, now, { expectedOwner: B, checkedAtMs: now, kind: "cross-host-unreachable-stale" }))
        .toEqual({ _tag: "LivenessUnconfirmed" })
      expect(yield* store.recoverClaim("r", B, 31_000, C, now, ev(B, C, now - 1))).toEqual({ _tag: "LivenessUnconfirmed" })
      expect(yield* everything).toEqual(before)
      // The matching recovery expires only the claim: the owner is untouched and a new thief may steal.
      expect(yield* store.recoverClaim("r", B, 31_000, C, now, ev(B, C, now))).toEqual({ _tag: "Recovered" })
      const row = yield* store.get("r")
      expect([row.status, row.owner, row.heartbeatAtMs, row.claim]).toEqual(["running", A, 0, null])
      expect(yield* store.activate("r", B, 31_000, running(A, 0))).toEqual({ _tag: "ClaimLost" })
      expect(yield* store.steal("r", row, C, now, ev(A, C, now))).toEqual({ _tag: "Claimed", claimedAtMs: now })
      expect(yield* store.activate("r", C, now, row)).toEqual({ _tag: "Activated" })
      expect(yield* facts("r")).toEqual(["claimed", "activated", "stolen", "expired", "stolen", "activated"])
    })), probeTimeout)

  it.effect("a thief's pending claim cannot revive a run its owner settled meanwhile", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      const attempts = yield* AttemptStore.AttemptStore
      yield* TestClock.setTime(31_000)
      const old = running(A, 0)
      expect(yield* store.steal("r", old, B, 31_000, ev(A, B, 31_000))).toEqual({ _tag: "Claimed", claimedAtMs: 31_000 })
      // The claimant is not an owner: every owned write refuses it ...
      const attempt = { runId: "r", stepKeyDigest: "s", attempt: 0, state: "running", startedAtMs: 1, meta: {} }
      expect(yield* store.heartbeat("r", B, 31_000)).toEqual({ _tag: "FenceLost" })
      expect(yield* store.transitionOwned("r", B, "running")).toEqual({ _tag: "FenceLost" })
      expect(yield* store.acknowledgeCancel("r", B, 31_000)).toBe(false)
      expect(yield* attempts.put(attempt, B)).toEqual({ _tag: "FenceLost" })
      // ... while the old owner keeps working until the thief activates.
      expect(yield* attempts.put(attempt, A)).toEqual({ _tag: "Inserted" })
      expect(yield* store.transitionOwned("r", A, "completed", '{"done":1}')).toEqual({ _tag: "Transitioned" })
      expect(yield* store.activate("r", B, 31_000, old)).toEqual({ _tag: "ClaimLost" })
      const row = yield* store.get("r")
      expect([row.status, row.owner, row.claim, row.stateJson]).toEqual(["completed", null, null, '{"done":1}'])
      expect(yield* attempts.put({ ...attempt, attempt: 1 }, B)).toEqual({ _tag: "FenceLost" })
      expect(yield* facts("r")).toEqual(["claimed", "activated", "stolen", "released", "released"])
    })), probeTimeout)

  it.effect("after the thief activates, the old owner's attempt writes are fenced and the new owner's land", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      const attempts = yield* AttemptStore.AttemptStore
      const attempt = { runId: "r", stepKeyDigest: "s", attempt: 0, state: "running", startedAtMs: 1, meta: { by: "A" } }
      expect(yield* attempts.put(attempt, A)).toEqual({ _tag: "Inserted" })
      yield* TestClock.setTime(31_000)
      expect(yield* store.claimAndOwn("r", running(A, 0), C, 31_000, ev(A, C, 31_000))).toEqual({ _tag: "Activated" })
      const id = { runId: "r", stepKeyDigest: "s", attempt: 0 }
      expect(yield* attempts.put({ ...attempt, attempt: 1 }, A)).toEqual({ _tag: "FenceLost" })
      expect(yield* attempts.put(attempt, A)).toEqual({ _tag: "FenceLost" })
      expect(yield* attempts.heartbeat("r", "s", 0, A, 31_000, { cp: "A" })).toEqual({ _tag: "FenceLost" })
      expect(yield* attempts.patch(id, { outcome: { by: "A" } }, A)).toEqual({ _tag: "FenceLost" })
      expect(yield* attempts.finish({ ...id, state: "succeeded", finishedAtMs: 31_000 }, A)).toEqual({ _tag: "FenceLost" })
      const stored = yield* attempts.get(id)
      expect(stored._tag === "Some" && [stored.value.state, stored.value.checkpoint, stored.value.outcome]).toEqual([
        "running",
        undefined,
        undefined
      ])
      expect(yield* attempts.heartbeat("r", "s", 0, C, 31_001, { cp: "C" })).toEqual({ _tag: "Updated" })
      expect(yield* attempts.finish({ ...id, state: "failed", finishedAtMs: 31_002 }, C)).toEqual({ _tag: "Finished" })
    })), probeTimeout)

  it.effect("an attempt's heartbeat stamp never moves backwards", () =>
    run(Effect.gen(function*() {
      yield* owned("r")
      const attempts = yield* AttemptStore.AttemptStore
      const id = { runId: "r", stepKeyDigest: "s", attempt: 0 }
      yield* attempts.put({ ...id, state: "running", startedAtMs: 1, meta: {} }, A)
      expect(yield* attempts.heartbeat("r", "s", 0, A, 5_000)).toEqual({ _tag: "Updated" })
      expect(yield* attempts.heartbeat("r", "s", 0, A, 4_000, { late: true })).toEqual({ _tag: "Updated" })
      const stored = yield* attempts.get(id)
      expect(stored._tag === "Some" && [stored.value.heartbeatAtMs, stored.value.checkpoint]).toEqual([5_000, { late: true }])
    })), probeTimeout)

  it.effect("bad attempt input names the field and the rule and writes nothing", () =>
    run(Effect.gen(function*() {
      yield* owned("r")
      const attempts = yield* AttemptStore.AttemptStore
      const id = { runId: "r", stepKeyDigest: "s", attempt: 0 }
      yield* attempts.put({ ...id, state: "running", startedAtMs: 1, meta: {} }, A)
      const before = yield* everything
      let reads = 0
      const getter = Object.defineProperty({}, "v", { enumerable: true, get: () => (reads++, 1) })
      const cases: ReadonlyArray<readonly [Effect.Effect<unknown, AttemptStore.AttemptStoreError>, string]> = [
        [attempts.heartbeat("r", "s", 0, A, -1), "nowMs"],
        [attempts.heartbeat("r", "s", 0, { ...A, pid: 1.5 }, 1), "owner.pid"],
        [attempts.heartbeat("r", "s", 0, A, 1, { n: NaN } as any), "checkpoint"],
        [attempts.heartbeat("r", "s", 0, A, 1, getter as any), "checkpoint"],
        [attempts.finish({ ...id, state: "done", finishedAtMs: -5 }, A), "finishedAtMs"],
        [attempts.patch(id, { meta: undefined, outcome: [1, , 3] as any }, A), "outcome"],
        [attempts.patch(id, { checkpoint: getter as any }, A), "checkpoint"],
        [attempts.put({ ...id, state: "running", startedAtMs: 1, meta: {} }, { ...A, nonce: "" }), "owner.nonce"]
      ]
      for (const [call, field] of cases) {
        const error = yield* Effect.flip(call)
        expect([error.code, error.message.includes(field)]).toEqual(["invalid_attempt", true])
      }
      expect(reads).toBe(0)
      expect(yield* everything).toEqual(before)
    })), probeTimeout)

  it.effect("bad transition input names the field and the rule and writes nothing", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      yield* TestClock.setTime(31_000)
      yield* store.steal("r", running(A, 0), B, 31_000, ev(A, B, 31_000))
      const before = yield* everything
      const deep = "[".repeat(130) + "]".repeat(130)
      const cases: ReadonlyArray<readonly [Effect.Effect<unknown, RunStore.RunStoreError>, string]> = [
        [store.transitionOwned("r", A, "completed", "{"), "stateJson"],
        [store.transitionOwned("r", A, "completed", deep), "stateJson"],
        [store.transitionOwned("r", A, "suspended", '{"v":"\\ud800"}'), "stateJson"],
        [store.transitionOwned("r", A, "cancelled", new String("{}") as any), "stateJson"],
        [store.transitionOwned("r", { ...A, pid: -1 }, "completed"), "owner.pid"],
        [store.activate("r", B, 31_000, { status: "running", owner: A, heartbeatAtMs: 1.5 }), "expected"],
        [store.abandonClaim("r", { ...B, hostId: "" }, 31_000), "claimant.hostId"],
        [store.recoverClaim("r", B, 31_000, C, 31_000, { ...ev(B, C, 31_000), kind: "pid-dead" as any }), "evidence.kind"],
        [store.claimAndOwn("r", running(A, 0), C, 31_000, { ...ev(A, C, 31_000), expectedOwner: { ...A, pid: -1 } }), "evidence.expectedOwner"]
      ]
      for (const [call, field] of cases) {
        const error = yield* Effect.flip(call)
        expect(error.code).toBe("invalid_run")
        expect((error.cause as { field: string }).field.startsWith(field)).toBe(true)
        expect(error.message).toContain(field)
      }
      expect(yield* everything).toEqual(before)
    })), probeTimeout)

  it.effect("a hand-off inside the caller's write that then fails leaves row, lease and facts as before, and can be redone", () =>
    run(Effect.gen(function*() {
      const store = yield* owned("r")
      const writer = yield* DurableWriter.DurableWriter
      const journal = yield* Journal.Journal
      yield* TestClock.setTime(31_000)
      const before = yield* everything
      const factsBefore = yield* factEntries("r")
      for (const attempt of [
        store.steal("r", running(A, 0), B, 31_000, ev(A, B, 31_000)),
        store.claimAndOwn("r", running(A, 0), C, 31_000, ev(A, C, 31_000)),
        store.transitionOwned("r", A, "suspended")
      ] as ReadonlyArray<Effect.Effect<{ readonly _tag: string }, RunStore.RunStoreError>>) {
        for (const wrap of [
          (e: Effect.Effect<unknown, unknown>) => writer.write(e, { key: "r" }),
          (e: Effect.Effect<unknown, unknown>) => journal.transact(e, { key: "r" })
        ]) {
          const failed = yield* Effect.either(wrap(Effect.zipRight(
            Effect.tap(attempt, (out) => expect(["Claimed", "Activated", "Transitioned"]).toContain(out._tag)),
            Effect.fail("caller gave up" as const)
          )))
          expect(failed._tag).toBe("Left")
          expect(yield* everything).toEqual(before)
          expect(yield* factEntries("r")).toEqual(factsBefore)
        }
      }
      // Redone outside, each hand-off lands and journals its facts at the next positions.
      expect(yield* store.steal("r", running(A, 0), B, 31_000, ev(A, B, 31_000))).toEqual({ _tag: "Claimed", claimedAtMs: 31_000 })
      expect(yield* store.activate("r", B, 31_000, running(A, 0))).toEqual({ _tag: "Activated" })
      const entries = yield* factEntries("r")
      expect(entries.map((e) => e.eventType.replace("flows.consensus.", ""))).toEqual(["claimed", "activated", "stolen", "activated"])
      expect(entries.map((e) => e.seq)).toEqual([0, 1, 2, 3])
      expect(entries.slice(2).map((e) => (e.payload as any).owner)).toEqual([B, B])
    })), probeTimeout)

  it.effect("model: random ownership traffic keeps row, lease table and companion facts in agreement", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const consensus = yield* Consensus.Consensus
      const sql = yield* SqlClient.SqlClient
      let seed = 12345
      const rand = (n: number) => { // mulberry32
        seed = (seed + 0x6D2B79F5) | 0
        let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
        return (((t ^ (t >>> 14)) >>> 0) % n)
      }
      const owners = [A, B, C, { ...A, nonce: "a2" }]
      const runs = ["m0", "m1", "m2"]
      for (const id of runs) yield* store.create(id, "{}")
      let now = 0
      const log: Array<string> = []
      const terminal = new Map<string, string>()
      const lastStamp = new Map<string, number | null>()
      let fresh = 0
      for (let step = 0; step < modelSteps; step++) {
        const slot = rand(runs.length)
        if (terminal.has(runs[slot]!)) {
          runs[slot] = `m${runs.length + fresh++}`
          yield* store.create(runs[slot]!, "{}")
        }
        const id = runs[slot]!
        let me = owners[rand(owners.length)]!
        const row = yield* store.get(id)
        const weights = [3, 3, 2, 2, 3, 3, 1, 2, 1, 2, 1]
        let pick = rand(weights.reduce((a, b) => a + b, 0))
        let op = 0
        while (pick >= weights[op]!) pick -= weights[op++]!
        if (op === 4 && row.owner && Consensus.sameOwner(row.owner, me) && rand(4) > 0) {
          me = owners.find((o) => !Consensus.sameOwner(o, row.owner!))!
        }
        let out: unknown
        switch (op) {
          case 0:
            now += [1, 1_000, 29_999, 30_000, 30_001, 15_000][rand(6)]!
            yield* TestClock.setTime(now)
            out = { now }
            break
          case 1:
            out = yield* store.claimAndOwn(id, row, me, now, row.owner ? ev(row.owner, me, now) : undefined)
            break
          case 2:
            out = yield* store.claim(id, row, me, now)
            break
          case 3:
            out = yield* store.activate(id, me, row.claimedAtMs ?? now, row)
            break
          case 4:
            out = row.owner ? yield* store.steal(id, row, me, now, ev(row.owner, me, now)) : "skip"
            break
          case 5:
            out = yield* store.heartbeat(id, me, Math.max(0, now - rand(3) * 1000))
            break
          case 6:
            out = yield* store.reconfirm(id, me, now)
            break
          case 7: {
            const to = (["running", "running", "suspended", "suspended", "completed", "failed", "cancelled"] as const)[rand(7)]!
            out = yield* store.transitionOwned(id, row.owner ?? me, to, `{"s":${step}}`,
              rand(2) === 0 ? { cancelRequested: "absent" } : {})
            break
          }
          case 8:
            out = row.claim ? yield* store.abandonClaim(id, row.claim, row.claimedAtMs!) : "skip"
            break
          case 9:
            out = row.claim
              ? yield* store.recoverClaim(id, row.claim, row.claimedAtMs!, me, now, ev(row.claim, me, now))
              : "skip"
            break
          default:
            out = yield* store.requestCancel(id, now)
        }
        log.push(`${step} ${id} op${op} ${me.nonce}@${me.pid} -> ${JSON.stringify(out)}`)
        // Invariants.
        const after = yield* store.get(id)
        const was = terminal.get(id)
        if (was !== undefined) expect([step, after.status]).toEqual([step, was])
        if (RunStore.isTerminalRunStatus(after.status)) terminal.set(id, after.status)
        const entries = yield* factEntries(id)
        let owner: unknown = null
        let claim: unknown = null
        let claimedAt: unknown = null
        let grantedAt: unknown = null
        for (const e of entries) {
          const p = e.payload as { owner: unknown; grantedAtMs: number | null }
          const t = e.eventType.replace("flows.consensus.", "")
          if (t === "claimed" || t === "stolen") [claim, claimedAt] = [p.owner, p.grantedAtMs]
          else if (t === "activated") [owner, claim, claimedAt, grantedAt] = [p.owner, null, null, p.grantedAtMs]
          else if (t === "expired") [claim, claimedAt] = [null, null]
          else if (t === "released") {
            if (p.grantedAtMs === null) [owner, grantedAt] = [null, null]
            else [claim, claimedAt] = [null, null]
          }
        }
        const ctx = `${log.slice(-6).join("\n")}\nfacts ${entries.map((e) => e.eventType).join(",")}`
        expect({ ctx, owner: after.owner, claim: after.claim, claimedAt: after.claimedAtMs }).toEqual({
          ctx,
          owner,
          claim,
          claimedAt
        })
        // The row is the lease record: its generation is the one the last activation was granted.
        const generation = (yield* sql<any>`SELECT granted_at_ms FROM flows_runs WHERE run_id = ${id}`)[0]
        expect({ ctx, grantedAt: generation.granted_at_ms === null ? null : Number(generation.granted_at_ms) })
          .toEqual({ ctx, grantedAt })
        for (const o of owners) {
          const guarded = yield* Effect.either(consensus.guard(id, o))
          const holds = after.status === "running" && after.owner !== null && Consensus.sameOwner(after.owner, o)
          expect({ ctx, o, guard: guarded._tag === "Right" }).toEqual({ ctx, o, guard: holds })
        }
        // The stamp of one ownership never moves backwards.
        const prev = lastStamp.get(id)
        if (prev != null && after.heartbeatAtMs !== null && row.owner && after.owner &&
          Consensus.sameOwner(row.owner, after.owner) && row.status === "running" && after.status === "running") {
          expect({ ctx, stamp: after.heartbeatAtMs >= prev }).toEqual({ ctx, stamp: true })
        }
        lastStamp.set(id, after.heartbeatAtMs)
      }
      // The walk reached every kind of hand-off, not just refusals.
      const reached = new Set(log.map((l) => {
        const [, opName, value] = /(op\d+) \S+ -> (.*)$/.exec(l)!
        const parsed = JSON.parse(value!)
        return `${opName}:${typeof parsed === "string" ? parsed : parsed._tag ?? "time"}`
      }))
      for (const tag of ["op1:Activated", "op3:Activated", "op4:Claimed", "op8:Abandoned", "op9:Recovered", "op7:Transitioned"]) {
        expect([tag, reached.has(tag)]).toEqual([tag, true])
      }
    })), walkTimeout)
}

/** Two hosts (separate connections) over one database, each with its own stores and strategy build. */
type Hosts = Effect.Effect<readonly [Context.Context<Env>, Context.Context<Env>], unknown, Scope.Scope>

const sqliteHosts: Hosts = Effect.gen(function*() {
  const scope = yield* Scope.Scope
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "run-store-break-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
  const file = path.join(dir, "runs.db")
  const one = yield* Layer.buildWithScope(stack(SqliteDatabase.layer({ filename: file })), scope)
  const two = yield* Layer.buildWithScope(stack(SqliteDatabase.layer({ filename: file })), scope)
  return [one, two] as const
})

const postgresHosts = (url: string): Hosts =>
  Effect.gen(function*() {
    const scope = yield* Scope.Scope
    const one = yield* Layer.buildWithScope(stack(TestDatabase.layerPostgres(url)), scope)
    const rows = yield* Effect.provide(SqlClient.SqlClient.pipe(Effect.flatMap((sql) =>
      sql<{ s: string }>`SELECT current_schema() AS s`)), one)
    const two = yield* Layer.buildWithScope(stack(PgDatabase.layer({ url, schema: rows[0]!.s })), scope)
    return [one, two] as const
  })

/**
 * A clock whose wall time is the test's virtual `now` while sleeps and monotonic time stay live, so
 * writes can back off for real while every stamp (activation included) is virtual.
 */
const virtualClock = (live: Clock.Clock, now: () => number): Clock.Clock => ({
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: now,
  currentTimeMillis: Effect.sync(now),
  unsafeCurrentTimeNanos: () => live.unsafeCurrentTimeNanos(),
  currentTimeNanos: live.currentTimeNanos,
  sleep: (duration) => live.sleep(duration)
})

const races = (hosts: Hosts) => {
  it.live("race: concurrent owners on two connections: one terminal transition per run, row/lease/facts agree", () =>
    Effect.gen(function*() {
      const [one, two] = yield* hosts
      const runs = ["q0", "q1", "q2"]
      for (const id of runs) yield* Effect.provide(Effect.flatMap(RunStore.RunStore, (s) => s.create(id, "{}")), one)
      let now = 0
      let seed = 7
      const rand = (n: number) => {
        seed = (seed + 0x6D2B79F5) | 0
        let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
        return ((t ^ (t >>> 14)) >>> 0) % n
      }
      const terminalWins = new Map<string, Array<string>>()
      const activations = new Map<string, number>()
      const worker = (k: number) =>
        Effect.gen(function*() {
          const store = yield* RunStore.RunStore
          const me = { hostId: `host-${k % 2}`, pid: 1000 + k, nonce: `w${k}` }
          for (let i = 0; i < 100; i++) {
            const id = runs[rand(runs.length)]!
            const row = yield* store.get(id)
            const at = now
            switch (rand(7)) {
              case 0:
                now += [1_000, 30_001][rand(2)]!
                break
              case 1: {
                const out = yield* store.claimAndOwn(id, row, me, at, row.owner ? ev(row.owner, me, at) : undefined)
                if (out._tag === "Activated") activations.set(`${id}/${me.nonce}`, (activations.get(`${id}/${me.nonce}`) ?? 0) + 1)
                break
              }
              case 2: {
                const got = row.owner
                  ? yield* store.steal(id, row, me, at, ev(row.owner, me, at))
                  : yield* store.claim(id, row, me, at)
                if (got._tag === "Claimed") {
                  const out = yield* store.activate(id, me, got.claimedAtMs, row)
                  if (out._tag === "Activated") activations.set(`${id}/${me.nonce}`, (activations.get(`${id}/${me.nonce}`) ?? 0) + 1)
                }
                break
              }
              case 3:
                yield* store.heartbeat(id, me, at)
                break
              case 4: {
                const to = (["running", "running", "suspended", "suspended", "suspended", "completed"] as const)[rand(6)]!
                const out = yield* store.transitionOwned(id, me, to, `{"by":"${me.nonce}"}`, { cancelRequested: "absent" })
                if (out._tag === "Transitioned" && to === "completed") {
                  terminalWins.set(id, [...(terminalWins.get(id) ?? []), me.nonce])
                }
                break
              }
              case 5:
                if (row.claim) yield* store.recoverClaim(id, row.claim, row.claimedAtMs!, me, at, ev(row.claim, me, at))
                break
              default:
                if (row.claim) yield* store.abandonClaim(id, row.claim, row.claimedAtMs!)
            }
          }
        }).pipe(Effect.provide(k % 2 === 0 ? one : two), Effect.withClock(clock))
      const clock = virtualClock(yield* Effect.clock, () => now)
      yield* Effect.all(Array.from({ length: 6 }, (_, k) => worker(k)), { concurrency: 6 })
      yield* Effect.gen(function*() {
        const store = yield* RunStore.RunStore
        const sql = yield* SqlClient.SqlClient
        for (const id of runs) {
          expect((terminalWins.get(id) ?? []).length).toBeLessThanOrEqual(1)
          const row = yield* store.get(id)
          if (terminalWins.has(id)) expect([row.status, row.stateJson]).toEqual(["completed", `{"by":"${terminalWins.get(id)![0]}"}`])
          const entries = yield* factEntries(id)
          // Every Activated answer has exactly one activated fact, and no fact is unanswered.
          const counted = new Map<string, number>()
          for (const e of entries) {
            if (e.eventType !== "flows.consensus.activated") continue
            const key = `${id}/${(e.payload as any).owner.nonce}`
            counted.set(key, (counted.get(key) ?? 0) + 1)
          }
          for (const [key, n] of counted) expect([key, activations.get(key)]).toEqual([key, n])
          for (const [key, n] of activations) if (key.startsWith(`${id}/`)) expect([key, counted.get(key)]).toEqual([key, n])
          // An owner always carries its generation on the row, and only an owner does.
          const lease = (yield* sql<any>`SELECT granted_at_ms FROM flows_runs WHERE run_id = ${id}`)[0]
          expect(lease.granted_at_ms !== null).toEqual(row.owner !== null)
        }
      }).pipe(Effect.provide(one))
    }).pipe(Effect.scoped), walkTimeout)

  it.live("race: each pair of competing hand-offs has exactly one winner, on two connections", () =>
    Effect.gen(function*() {
      const [one, two] = yield* hosts
      let now = 0
      const clock = virtualClock(yield* Effect.clock, () => now)
      const on = <X>(ctx: Context.Context<Env>, f: (s: RunStore.Service) => Effect.Effect<X, RunStore.RunStoreError>) =>
        Effect.provide(Effect.flatMap(RunStore.RunStore, f), ctx).pipe(Effect.withClock(clock))
      const both = <X, Y>(x: Effect.Effect<X, unknown>, y: Effect.Effect<Y, unknown>) =>
        Effect.all([x, y] as const, { concurrency: 2 })
      const wins = { abandonOrActivate: [0, 0], recoverOrActivate: [0, 0], twoThieves: 0, completeOrTakeover: [0, 0] }
      for (let i = 0; i < 12; i++) {
        // A stale owner A at stamp 0; everything below reads at 31,000 (behind any reference clock).
        const id = `h${i}`
        now = 0
        yield* on(one, (s) => s.create(id, "{}"))
        yield* on(one, (s) => s.claimAndOwn(id, pending, A, 0))
        const old = running(A, 0)
        const t = 31_000
        now = t
        // 1. The thief's own abandon against its activation.
        expect(yield* on(one, (s) => s.steal(id, old, B, t, ev(A, B, t)))).toEqual({ _tag: "Claimed", claimedAtMs: t })
        const [abandoned, activated] = yield* both(
          on(one, (s) => s.abandonClaim(id, B, t)),
          on(two, (s) => s.activate(id, B, t, old))
        )
        expect([abandoned._tag, activated._tag].sort()).toEqual(
          abandoned._tag === "Abandoned" ? ["Abandoned", "ClaimLost"] : ["Activated", "ClaimLost"]
        )
        wins.abandonOrActivate[abandoned._tag === "Abandoned" ? 0 : 1]!++
        let row = yield* on(one, (s) => s.get(id))
        expect(row.owner).toEqual(activated._tag === "Activated" ? B : A)
        const owner = row.owner!
        const stamp = row.heartbeatAtMs!
        // 2. A peer's recovery of a stale claim against the late claimant's activation.
        const t2 = stamp + 30_001
        now = t2
        const thief = Consensus.sameOwner(owner, B) ? C : B
        expect((yield* on(one, (s) => s.steal(id, row, thief, t2, ev(owner, thief, t2))))._tag).toBe("Claimed")
        const t3 = t2 + 30_001
        now = t3
        const observer = Consensus.sameOwner(thief, B) ? C : B
        const [recovered, late] = yield* both(
          on(one, (s) => s.recoverClaim(id, thief, t2, observer, t3, ev(thief, observer, t3))),
          on(two, (s) => s.activate(id, thief, t2, row))
        )
        expect([recovered._tag === "Recovered", late._tag === "Activated"].filter(Boolean).length).toBe(1)
        wins.recoverOrActivate[recovered._tag === "Recovered" ? 0 : 1]!++
        row = yield* on(one, (s) => s.get(id))
        expect([row.owner, row.claim]).toEqual([late._tag === "Activated" ? thief : owner, null])
        // 3. Two thieves on two connections: one claim.
        const t4 = row.heartbeatAtMs! + 30_001
        now = t4
        const x = { hostId: "host-x", pid: 7, nonce: `x${i}` }
        const y = { hostId: "host-y", pid: 8, nonce: `y${i}` }
        const [sx, sy] = yield* both(
          on(one, (s) => s.claimAndOwn(id, row, x, t4, ev(row.owner!, x, t4))),
          on(two, (s) => s.claimAndOwn(id, row, y, t4, ev(row.owner!, y, t4)))
        )
        expect([sx._tag, sy._tag].filter((tag) => tag === "Activated").length).toBe(1)
        wins.twoThieves++
        const winner = sx._tag === "Activated" ? x : y
        // 4. The deposed owner's guarded completion against a takeover of a stale lease.
        row = yield* on(one, (s) => s.get(id))
        const t5 = row.heartbeatAtMs! + 30_001
        now = t5
        const z = { hostId: "host-z", pid: 9, nonce: `z${i}` }
        const [completed, taken] = yield* both(
          on(one, (s) => s.transitionOwned(id, winner, "completed", '{"done":true}', { cancelRequested: "absent" })),
          on(two, (s) => s.claimAndOwn(id, row, z, t5, ev(winner, z, t5)))
        )
        expect([completed._tag === "Transitioned", taken._tag === "Activated"].filter(Boolean).length).toBe(1)
        wins.completeOrTakeover[completed._tag === "Transitioned" ? 0 : 1]!++
        row = yield* on(one, (s) => s.get(id))
        expect(row.status).toBe(completed._tag === "Transitioned" ? "completed" : "running")
        if (taken._tag === "Activated") {
          expect(yield* on(one, (s) => s.transitionOwned(id, winner, "completed"))).toEqual({ _tag: "FenceLost" })
        }
        // After every round the row holds no claim and an owner only with its generation.
        const lease = yield* Effect.provide(
          Effect.flatMap(SqlClient.SqlClient, (sql) => sql<any>`SELECT granted_at_ms FROM flows_runs WHERE run_id = ${id}`),
          one
        )
        expect(lease[0].granted_at_ms !== null).toEqual(row.owner !== null)
        expect(row.claim).toEqual(null)
      }
      expect(wins.twoThieves).toBe(12)
    }).pipe(Effect.scoped), walkTimeout)
}

/** SQLite: Effect's Clock is the reference, so the allowance's edges are exact. */
const sqliteOnly = () => {
  const everything = Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`SELECT * FROM flows_runs ORDER BY run_id`,
      sql`SELECT * FROM flows_journal_heads ORDER BY run_id`,
      sql`SELECT * FROM flows_run_changes ORDER BY run_id`
    ]))

  it.effect("every lease reading is admitted 10,000 ms ahead and refused at 10,001 with nothing written", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* TestClock.setTime(100_000)
      for (const id of ["own", "steal", "recover", "beat"]) yield* store.create(id, "{}")
      yield* store.claimAndOwn("own", pending, A, 60_000)
      yield* store.claimAndOwn("steal", pending, A, 60_000)
      yield* store.claim("recover", pending, A, 60_000)
      yield* store.claimAndOwn("beat", pending, A, 100_000)
      const calls = (ahead: number) => {
        const t = 100_000 + ahead
        return [
          ["claimAndOwn", store.claimAndOwn("own", running(A, 60_000), B, t, ev(A, B, t))],
          ["steal", store.steal("steal", running(A, 60_000), C, t, ev(A, C, t))],
          ["recoverClaim", store.recoverClaim("recover", A, 60_000, C, t, ev(A, C, t))],
          ["heartbeat", store.heartbeat("beat", A, t)],
          ["reconfirm", store.reconfirm("beat", A, t)]
        ] as const
      }
      const before = yield* everything
      for (const [method, call] of calls(10_001)) {
        const error = yield* Effect.flip(call as Effect.Effect<unknown, RunStore.RunStoreError>)
        expect([error.code, error.method, error.message]).toEqual([
          "invalid_run",
          method,
          `invalid_run: RunStore.${method}: nowMs leads the effect clock by more than 10000 ms`
        ])
      }
      expect(yield* everything).toEqual(before)
      const admitted: Array<unknown> = []
      for (const [, call] of calls(10_000)) admitted.push(yield* (call as Effect.Effect<unknown, RunStore.RunStoreError>))
      expect(admitted).toEqual([
        { _tag: "Activated" },
        { _tag: "Claimed", claimedAtMs: 110_000 },
        { _tag: "Recovered" },
        { _tag: "Updated", heartbeatAtMs: 110_000 },
        { _tag: "Updated", heartbeatAtMs: 110_000 }
      ])
      // The stamp pinned 10 s ahead is judged literally: stale only strictly after 140,000.
      yield* TestClock.setTime(130_000)
      expect(yield* store.steal("beat", running(A, 110_000), C, 140_000, ev(A, C, 140_000))).toEqual({ _tag: "HeartbeatFresh" })
      yield* TestClock.setTime(130_001)
      expect(yield* store.steal("beat", running(A, 110_000), C, 140_001, ev(A, C, 140_001))).toEqual({
        _tag: "Claimed",
        claimedAtMs: 140_001
      })
    }).pipe(Effect.provide(sqliteStack())), probeTimeout)

  it.effect("keepAlive started late counts its budget from the stored stamp, not from its own start", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      expect(yield* store.claimAndOwn("r", pending, A, 0)).toEqual({ _tag: "Activated" })
      // The owner reaches keepAlive 15 s after its claim, and the database stops taking its writes.
      yield* TestClock.setTime(15_000)
      const down = Effect.fail(new RunStore.RunStoreError({ code: "persistence_failed", method: "heartbeat", message: "down", cause: null }))
      const broken: RunStore.Service = { ...store, heartbeat: () => down, reconfirm: () => down }
      const work = yield* Effect.fork(Effect.never)
      const loop = yield* Effect.fork(
        Heartbeat.keepAlive("r", A, work).pipe(Effect.provideService(RunStore.RunStore, broken))
      )
      yield* TestClock.adjust(3_999)
      yield* Effect.repeatN(Effect.yieldNow(), 20)
      expect(work.unsafePoll()).toBeNull()
      yield* TestClock.adjust(1)
      yield* Effect.repeatN(Effect.yieldNow(), 20)
      expect(work.unsafePoll()).not.toBeNull()
      expect(yield* Fiber.join(loop)).toEqual({ _tag: "Lapsed", unconfirmedMs: 19_000 })
      // It stopped while even a peer reading 10 s ahead (the most admitted) still sees the lease fresh.
      expect(yield* store.steal("r", running(A, 0), B, 29_000, ev(A, B, 29_000))).toEqual({ _tag: "HeartbeatFresh" })
    }).pipe(Effect.provide(sqliteStack())), probeTimeout)
}

const serverMs = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(
    sql<{ ms: number }>`SELECT floor(extract(epoch from clock_timestamp()) * 1000)::bigint AS ms`,
    (rows) => Number(rows[0]!.ms)
  ))

/** PostgreSQL: Effect's Clock is the host's, the database clock the reference. */
const hostClockAhead = (makeStack: MakeStack) => {
  it.effect("activate on a host whose Clock runs 60 s ahead is refused and cannot pin the lease into the future", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      const now = yield* serverMs
      yield* store.create("r", "{}")
      // The claim's reading is correct (the host read the database clock for it) ...
      expect(yield* store.claim("r", pending, A, now)).toEqual({ _tag: "Claimed", claimedAtMs: now })
      const before = yield* Effect.all([
        sql`SELECT * FROM flows_runs`,
        sql`SELECT * FROM flows_journal_heads`
      ])
      // ... but its own Clock is a minute ahead when it activates.
      yield* TestClock.setTime(now + 60_000)
      const error = yield* Effect.flip(store.activate("r", A, now, pending))
      expect(error.code).toBe("invalid_run")
      expect(error.cause).toMatchObject({ field: "activatedAtMs (this host's Clock)", nowMs: now + 60_000, detail: "database clock" })
      expect(error.message).toContain("activatedAtMs (this host's Clock) leads the database clock by more than 10000 ms")
      expect(yield* Effect.all([
        sql`SELECT * FROM flows_runs`,
        sql`SELECT * FROM flows_journal_heads`
      ])).toEqual(before)
      // A Clock within the allowance activates; the stamp leads the database by at most 10 s.
      yield* TestClock.setTime((yield* serverMs) + 5_000)
      expect(yield* store.activate("r", A, now, pending)).toEqual({ _tag: "Activated" })
      expect((yield* store.get("r")).heartbeatAtMs! - (yield* serverMs)).toBeLessThanOrEqual(10_000)
    }).pipe(Effect.provide(makeStack())), probeTimeout)
}

describe("break probes (SQLite)", () => {
  probes(sqliteStack)
  races(sqliteHosts)
  sqliteOnly()
})

const url = TestDatabase.postgresTestUrl("run-store break probes")
describe.skipIf(url === undefined)("break probes (PostgreSQL)", () => {
  probes(postgresStack(url!))
  races(postgresHosts(url!))
  hostClockAhead(postgresStack(url!))
})
