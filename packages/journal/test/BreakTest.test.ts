/**
 * Adversarial probes of the guarantees docs/journal.md states, written from the
 * public surface only: admission errors, cross-connection idempotency and
 * fencing, cursor boundaries, refusals that must write nothing, and a
 * differential run of `Consensus.layerLocal` against `SqlConsensus`.
 */
import type { DurableWriter } from "@baton/database/DurableWriter"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as Consensus from "@baton/journal/Consensus"
import { Journal } from "@baton/journal/Journal"
import type * as JournalModule from "@baton/journal/Journal"
import * as Migrations from "@baton/journal/Migrations"
import type { OwnerId } from "@baton/journal/OwnerId"
import * as SqlConsensus from "@baton/journal/SqlConsensus"
import * as TestJournal from "@baton/journal/TestJournal"
import type * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Effect, Fiber, Layer, type Scope, Stream } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { A, B, C, count, ev, own, rows, S } from "./support/owners.js"
import { pgHosts } from "./support/pgHosts.js"

type Stack = Context.Context<Journal | Consensus.Consensus | DurableWriter | SqlClient.SqlClient>

// Every test names its timeout: a run outside the workspace config (a package's own `vitest run`)
// would otherwise get vitest's 5 s. Sized for a loaded 2-core machine: a probe is one scenario
// (well under a second idle); a walk or race across connections is bounded by its iteration
// count (the 2000-step strategy walk takes ~11 s on PostgreSQL under load), never by time.
const probeTimeout = 60_000
const walkTimeout = 240_000

const tempFile = () => path.join(mkdtempSync(path.join(tmpdir(), "baton-break-")), "journal.db")
const on = <A, E>(host: Stack, effect: Effect.Effect<A, E, any>) => Effect.provide(effect, host) as Effect.Effect<A, E>
const journalOf = (host: Stack) => Context.get(host, Journal)

/** Two independent stacks (connection, journal, SqlConsensus) over one SQLite file. */
const twoHosts = (options: { readonly pollInterval?: string } = {}) =>
  Effect.gen(function*() {
    const filename = tempFile()
    const first = yield* Layer.build(TestJournal.layerOn(SqliteDatabase.layer({ filename }), options as any))
    const second = yield* Layer.build(TestJournal.layerOn(SqliteDatabase.layer({ filename }), options as any))
    return [first, second] as const
  })

describe("BreakTest: admission errors", () => {
  it.effect("a refused emit never quotes the offending value in its message", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      const secret = "hunter2-SECRET-value"
      const cases: Array<[Record<string, unknown>, string]> = [
        [ev("r", {}, { eventType: { password: secret } }), "input.eventType"],
        [ev("r", {}, { sourceSeq: secret }), "input.sourceSeq"],
        [ev("r", {}, { dedupe: secret }), "input.dedupe"],
        [ev([secret] as any, {}), "input.runId"],
        [ev("r", {}, { sourceId: { token: secret } }), "input.sourceId"]
      ]
      for (const [input, field] of cases) {
        for (const emit of [journal.emitDurableUnfenced, journal.emitLossy]) {
          const error = yield* Effect.flip(emit(input as any))
          expect(error.code).toBe("invalid_event")
          expect(error.field).toBe(field)
          expect(error.message.includes("hunter2"), error.message).toBe(false)
        }
      }
      const owner = yield* Effect.flip(journal.emitDurable(ev("r", {}), { hostId: "h", pid: secret as any, nonce: "n" }))
      expect(owner.field).toBe("owner.pid")
      expect(owner.message.includes("hunter2"), owner.message).toBe(false)
      yield* journal.flush
      expect(yield* count("flows_journal_events")).toBe(0)
      expect(yield* count("flows_journal_heads")).toBe(0)
    }).pipe(Effect.provide(TestJournal.layer())), probeTimeout)

  it.effect("refusals (oversize, fence_lost, conflict) write no row, no head and consume no sourceSeq", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      const big = yield* Effect.flip(journal.emitDurableUnfenced(ev("r", { pad: "x".repeat(200) })))
      expect([big.code, big.field]).toEqual(["invalid_event", "input.payload"])
      const bigMeta = yield* Effect.flip(journal.emitLossy(ev("r", {}, { meta: { pad: "y".repeat(200) } })))
      expect(bigMeta.code).toBe("invalid_event")
      const fenced = yield* Effect.flip(journal.emitDurable(ev("r", { a: 1 }), A))
      expect(fenced.code).toBe("fence_lost")
      expect(yield* count("flows_journal_heads")).toBe(0)
      expect(yield* journal.emitDurableUnfenced(ev("r", { a: 1 }))).toEqual({ _tag: "Accepted", seq: 0, sourceSeq: 0 })
      const conflict = yield* Effect.flip(journal.emitDurableUnfenced(ev("r", { a: 2 }, { sourceSeq: 0 })))
      expect(conflict.code).toBe("idempotency_conflict")
      expect(yield* journal.emitDurableUnfenced(ev("r", { a: 3 }))).toEqual({ _tag: "Accepted", seq: 1, sourceSeq: 1 })
      expect((yield* rows("r")).map((row) => [row.seq, row.source_seq])).toEqual([[0, 0], [1, 1]])
    }).pipe(Effect.provide(TestJournal.layer({ maxEntryBytes: 100 }))), probeTimeout)

  it.effect("secrets redacting to one placeholder are the same event", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      const first = yield* journal.emitDurableUnfenced(ev("r", { token: "one", n: 1 }, { sourceSeq: 3 }))
      expect(yield* journal.emitDurableUnfenced(ev("r", { n: 1, token: "two" }, { sourceSeq: 3 }))).toEqual({
        _tag: "Duplicate",
        seq: first.seq,
        sourceSeq: 3,
        status: "committed"
      })
      expect((yield* rows("r")).map((row) => row.payload_json)).toEqual([`{"n":1,"token":"[REDACTED]"}`])
    }).pipe(Effect.provide(TestJournal.layer())), probeTimeout)
})

describe("BreakTest: lossy identities", () => {
  it.effect("a dedupe: \"identity\" collapse caches the stored content, not the discarded one", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      const x = (v: number, extra: Record<string, unknown> = {}) => ev("r", { v }, { sourceSeq: 0, ...extra })
      expect(yield* journal.emitDurableUnfenced(x(1))).toMatchObject({ _tag: "Accepted", seq: 0 })
      // Push the identity out of the (bound 1) cache so the next lossy emit reaches the writer.
      yield* journal.emitDurableUnfenced(ev("r", { other: true }, { sourceSeq: 1 }))
      expect(yield* journal.emitLossy(x(2, { dedupe: "identity" }))).toEqual({ _tag: "Accepted", sourceSeq: 0 })
      yield* journal.flush
      expect((yield* rows("r")).map((row) => row.payload_json)).toEqual([`{"v":1}`, `{"other":true}`])
      // The stored event is { v: 1 }: re-emitting it is a Duplicate on both channels, { v: 2 } a conflict.
      expect(yield* journal.emitDurableUnfenced(x(1))).toEqual({ _tag: "Duplicate", seq: 0, sourceSeq: 0, status: "committed" })
      expect(yield* journal.emitLossy(x(1))).toEqual({ _tag: "Duplicate", seq: 0, sourceSeq: 0, status: "committed" })
      expect((yield* Effect.flip(journal.emitDurableUnfenced(x(2)))).code).toBe("idempotency_conflict")
      expect((yield* Effect.flip(journal.emitLossy(x(2)))).code).toBe("idempotency_conflict")
      yield* journal.flush
      expect((yield* rows("r")).length).toBe(2)
    }).pipe(Effect.provide(TestJournal.layer({ identityCache: 1 }))), probeTimeout)

  it.effect("a conflicting entry loses only itself: its batch neighbours commit with contiguous seqs", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      yield* journal.emitDurableUnfenced(ev("r", { n: 1 }, { sourceSeq: 0 }))
      yield* journal.emitDurableUnfenced(ev("r", { n: 2 }, { sourceSeq: 1 }))
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(
        journal.transact(Deferred.succeed(entered, undefined).pipe(Effect.zipRight(Deferred.await(release))))
      )
      yield* Deferred.await(entered)
      yield* journal.emitLossy({ ...ev("q", { a: true }, { sourceSeq: 0 }), sourceId: "t" })
      yield* journal.emitLossy(ev("r", { n: 99 }, { sourceSeq: 0 }))
      yield* journal.emitLossy({ ...ev("r", { b: true }, { sourceSeq: 0 }), sourceId: "t" })
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      expect((yield* Effect.flip(journal.flush)).code).toBe("idempotency_conflict")
      yield* journal.flush
      expect((yield* rows("r")).map((row) => [row.seq, row.payload_json])).toEqual([
        [0, `{"n":1}`],
        [1, `{"n":2}`],
        [2, `{"b":true}`]
      ])
      expect((yield* rows("q")).map((row) => [row.seq, row.payload_json])).toEqual([[0, `{"a":true}`]])
      expect(yield* journal.emitDurableUnfenced(ev("r", { n: 3 }))).toMatchObject({ seq: 3, sourceSeq: 2 })
    }).pipe(Effect.provide(TestJournal.layer({ identityCache: 1 }))), probeTimeout)

  it.effect("an implicit sourceSeq never reuses an explicit one still queued on the lossy channel", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      const settle = Effect.repeatN(Effect.yieldNow(), 20)
      // Hold the writer: the lossy writer takes its first batch and waits behind the holder.
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(
        journal.transact(Deferred.succeed(entered, undefined).pipe(Effect.zipRight(Deferred.await(release))))
      )
      yield* Deferred.await(entered)
      expect(yield* journal.emitLossy(ev("p", { first: true }, { sourceSeq: 0 }))).toMatchObject({ _tag: "Accepted" })
      yield* settle
      // Still queued (next batch): explicit identities whose pairs have no known floor yet.
      yield* journal.emitLossy(ev("q", { explicit: 0 }, { sourceSeq: 0 }))
      yield* journal.emitLossy(ev("r", { explicit: 0 }, { sourceSeq: 0 }))
      const durable = yield* Effect.fork(journal.emitDurableUnfenced(ev("q", { implicit: true })))
      const lossy = yield* Effect.fork(journal.emitLossy(ev("r", { implicit: true })))
      yield* settle
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      expect((yield* Fiber.join(durable)).sourceSeq).not.toBe(0)
      expect((yield* Fiber.join(lossy)).sourceSeq).not.toBe(0)
      yield* journal.flush
      expect((yield* rows("q")).map((row) => row.payload_json).sort()).toEqual([`{"explicit":0}`, `{"implicit":true}`])
      expect((yield* rows("r")).map((row) => row.payload_json).sort()).toEqual([`{"explicit":0}`, `{"implicit":true}`])
    }).pipe(Effect.provide(TestJournal.layer())), probeTimeout)
})

const twoConnections = (name: string, hosts: (options?: { readonly pollInterval?: string }) => Effect.Effect<readonly [Stack, Stack], unknown, Scope.Scope>) =>
describe(`BreakTest: two connections on ${name}`, () => {
  it.live("idempotent durable emits agree across connections; implicit sourceSeqs never collide", () =>
    Effect.gen(function*() {
      const [one, two] = yield* hosts()
      const j1 = journalOf(one)
      const j2 = journalOf(two)
      // The same explicit identities, raced from both connections: one row each, both see its seq.
      const raced = yield* Effect.all(
        Array.from({ length: 20 }, (_, i) =>
          Effect.all([
            j1.emitDurableUnfenced(ev("r", { i, k: { b: 1, a: 2 } }, { sourceSeq: i })),
            j2.emitDurableUnfenced(ev("r", { k: { a: 2, b: 1 }, i }, { sourceSeq: i }))
          ], { concurrency: 2 })),
        { concurrency: 4 }
      )
      for (const [left, right] of raced) {
        expect(left.seq).toBe(right.seq)
        expect([left._tag, right._tag].sort()).toEqual(["Accepted", "Duplicate"])
      }
      // Implicit allocation on one source from both connections, interleaved.
      const implicit: Array<number> = []
      for (let i = 0; i < 10; i++) {
        implicit.push((yield* (i % 3 === 0 ? j2 : j1).emitDurableUnfenced(ev("r", { implicit: i }))).sourceSeq)
      }
      expect(implicit).toEqual(Array.from({ length: 10 }, (_, i) => 20 + i))
      // A changed content from the cold connection still conflicts.
      expect((yield* Effect.flip(j2.emitDurableUnfenced(ev("r", { i: 99 }, { sourceSeq: 0 })))).code).toBe(
        "idempotency_conflict"
      )
      // A lossy re-emission of a committed identity from the cold connection collapses silently.
      yield* j2.emitLossy(ev("r", { k: { a: 2, b: 1 }, i: 5 }, { sourceSeq: 5 }))
      yield* j2.flush
      const stored = yield* on(one, rows("r"))
      expect(stored.map((row) => row.seq)).toEqual(Array.from({ length: 30 }, (_, i) => i))
      expect(new Set(stored.map((row) => row.source_seq)).size).toBe(30)
    }).pipe(Effect.scoped), walkTimeout)

  it.live("a fence lost to another connection's steal blocks every fenced write of the old owner", () =>
    Effect.gen(function*() {
      const [one, two] = yield* hosts()
      const j1 = journalOf(one)
      yield* on(one, own("r", A, 0))
      expect(yield* j1.emitDurable(ev("r", { n: 0 }, { sourceSeq: 0 }), A)).toMatchObject({ seq: 0 })
      const thief = Context.get(two, Consensus.Consensus)
      const now = S + 1
      // Evidence naming someone other than the owner is refused; a fresh owner cannot be stolen.
      expect(yield* thief.steal("r", B, now, { expectedOwner: C, checkedAtMs: now, kind: "lease-expired" })).toEqual({
        _tag: "Rejected",
        reason: "evidence_invalid"
      })
      expect(yield* thief.steal("r", B, S, { expectedOwner: A, checkedAtMs: S, kind: "lease-expired" })).toEqual({
        _tag: "Rejected",
        reason: "owner_live"
      })
      const granted = yield* thief.steal("r", B, now, { expectedOwner: A, checkedAtMs: now, kind: "lease-expired" })
      expect(granted).toEqual({ _tag: "Granted", grantedAtMs: now })
      // Stolen but not activated: the old owner still holds the fence.
      expect(yield* j1.emitDurable(ev("r", { n: 1 }), A)).toMatchObject({ seq: 1 })
      expect(yield* thief.activate("r", B, now, now)).toEqual({ _tag: "Activated" })
      for (
        const attempt of [
          j1.emitDurable(ev("r", { n: 0 }, { sourceSeq: 0 }), A),
          j1.emitDurable(ev("r", { n: 2 }), A),
          j1.checkpoint({ runId: "r", seq: 0, state: {} }, A),
          j1.compact({ runId: "r" }, A)
        ] as const
      ) {
        expect((yield* Effect.flip(attempt as Effect.Effect<unknown, JournalModule.JournalError>)).code).toBe("fence_lost")
      }
      expect(yield* on(one, count("flows_journal_checkpoints"))).toBe(0)
      expect((yield* on(one, rows("r"))).length).toBe(2)
      expect(yield* journalOf(two).emitDurable(ev("r", { thief: true }), B)).toMatchObject({ seq: 2, sourceSeq: 2 })
    }).pipe(Effect.scoped), walkTimeout)

  it.live("a stream from afterSequence sees every later entry exactly once while two connections append", () =>
    Effect.gen(function*() {
      const [one, two] = yield* hosts({ pollInterval: "50 millis" })
      const j1 = journalOf(one)
      const j2 = journalOf(two)
      for (let i = 0; i < 5; i++) yield* j1.emitDurableUnfenced(ev("r", { i }))
      const follower = yield* Effect.fork(
        j1.stream({ runId: "r", afterSequence: 3 }).pipe(Stream.take(61), Stream.runCollect)
      )
      yield* Effect.all([
        Effect.forEach(Array.from({ length: 30 }), (_, i) => j1.emitDurableUnfenced({ ...ev("r", { i }), sourceId: "a" })),
        Effect.forEach(Array.from({ length: 30 }), (_, i) => j2.emitDurableUnfenced({ ...ev("r", { i }), sourceId: "b" }))
      ], { concurrency: 2 })
      const seen = Chunk.toReadonlyArray(yield* Fiber.join(follower)).map((entry) => entry.seq)
      expect(seen).toEqual(Array.from({ length: 61 }, (_, i) => i + 4))
    }).pipe(Effect.scoped), walkTimeout)
})

twoConnections("one SQLite file", twoHosts)

const pgUrl = TestDatabase.postgresTestUrl("journal break")
describe.skipIf(pgUrl === undefined)("PostgreSQL", () => {
  twoConnections("one PostgreSQL schema", (options) =>
    pgHosts(pgUrl!, 2, options as any).pipe(Effect.map((list) => [list[0]!, list[1]!] as const)))
})

describe("BreakTest: entries boundaries", () => {
  it.effect("hasMore counts only matching entries; after the tail is empty; after = floor − 1 is allowed", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      yield* own("r", A)
      for (let i = 0; i < 5; i++) yield* journal.emitDurable({ ...ev("r", { i }), eventType: "x" }, A)
      for (let i = 0; i < 5; i++) yield* journal.emitDurable({ ...ev("r", { i }), eventType: "y" }, A)
      const xs = yield* journal.entries({ runId: "r", eventTypes: ["x"], limit: 5 })
      expect([xs.entries.map((e) => e.seq), xs.hasMore]).toEqual([[0, 1, 2, 3, 4], false])
      const ys = yield* journal.entries({ runId: "r", eventTypes: ["y"], after: 6, limit: 2 })
      expect([ys.entries.map((e) => e.seq), ys.hasMore]).toEqual([[7, 8], true])
      expect(yield* journal.entries({ runId: "r", after: 9, limit: 1 })).toEqual({ entries: [], hasMore: false })
      expect(yield* journal.entries({ runId: "r", after: 8, limit: 1 })).toMatchObject({ hasMore: false })
      expect(yield* journal.entries({ runId: "nothing", limit: 1 })).toEqual({ entries: [], hasMore: false })
      yield* journal.checkpoint({ runId: "r", seq: 4, state: { at: 4 } }, A)
      yield* journal.checkpoint({ runId: "r", seq: 7, state: { at: 7 } }, A)
      // Compact to the older checkpoint explicitly: the newer one survives and stays the latest.
      expect(yield* journal.compact({ runId: "r", upTo: 4 }, A)).toEqual({ runId: "r", checkpointSeq: 4, deleted: 4 })
      const latest = yield* journal.latestCheckpoint("r")
      expect(latest._tag === "Some" ? [latest.value.seq, latest.value.compactedAtMs] : undefined).toEqual([7, null])
      expect((yield* journal.entries({ runId: "r", after: 3, limit: 1 })).entries.map((e) => e.seq)).toEqual([4])
      const below = yield* Effect.flip(journal.entries({ runId: "r", after: 2, eventTypes: ["nothing"], limit: 1 }))
      expect([below.code, below.checkpointSeq]).toEqual(["compacted", 4])
      const stream = yield* Effect.flip(Stream.runCollect(journal.stream({ runId: "r", afterSequence: 1 })))
      expect([stream.code, stream.checkpointSeq]).toEqual(["compacted", 4])
      // The floor moves up with the next compaction, the older checkpoint goes away.
      expect(yield* journal.compact({ runId: "r" }, A)).toEqual({ runId: "r", checkpointSeq: 7, deleted: 3 })
      expect((yield* Effect.flip(journal.compact({ runId: "r", upTo: 4 }, A))).code).toBe("checkpoint_invalid")
      expect((yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 5, state: {} }, A))).code).toBe("checkpoint_invalid")
      expect(yield* journal.emitDurable(ev("r", {}), A)).toMatchObject({ seq: 10 })
    }).pipe(Effect.provide(TestJournal.layer())), probeTimeout)
})

// A small deterministic PRNG so a failure replays.
const prng = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}

const agree = (
  name: string,
  database: () => Layer.Layer<DurableWriter | SqlClient.SqlClient, unknown>,
  steps: number
) =>
describe(`BreakTest: layerLocal and SqlConsensus on ${name} agree`, () => {
  it.effect("a random operation sequence yields the same outcomes and guards on both strategies", () =>
    Effect.gen(function*() {
      const local = yield* Consensus.makeLocal
      const sqlLayer = Layer.provideMerge(SqlConsensus.layer, Layer.provideMerge(Migrations.layer, database()))
      const remote = Context.get(yield* Layer.build(sqlLayer), Consensus.Consensus)
      const owners: ReadonlyArray<OwnerId> = [A, B, C]
      const kinds = ["same-host-pid-dead", "cross-host-unreachable-stale", "lease-expired"] as const
      const runs = ["r1", "r2"]
      const random = prng(7)
      const pick = <T>(list: ReadonlyArray<T>): T => list[Math.floor(random() * list.length)]!
      let now = 0
      const seen = new Set<string>()
      let lastGrantee: OwnerId = A
      let lastOwner: OwnerId = A
      const grants: Array<number> = [0]
      for (let step = 0; step < steps; step++) {
        // Time moves by small steps and by jumps landing exactly on and just past the cutoff.
        now += pick([0, 0, 1, 500, S - 1, S, S + 1])
        const run = pick(runs)
        const who = pick(owners)
        const evidence: Consensus.LivenessEvidence = {
          expectedOwner: pick([lastGrantee, lastOwner, pick(owners)]),
          checkedAtMs: random() < 0.85 ? now : now - 1,
          kind: pick(kinds)
        }
        const generation = random() < 0.7 ? grants[grants.length - 1]! : pick(grants)
        const lagging = Math.max(0, now - pick([0, 0, 2000]))
        const op = pick(["claim", "activate", "heartbeat", "reconfirm", "release", "steal", "recover", "guard"] as const)
        const apply = (c: Consensus.Service): Effect.Effect<unknown, Consensus.ConsensusError> => {
          switch (op) {
            case "claim":
              return c.claim(run, who, now)
            case "activate":
              return c.activate(run, who, generation, now)
            case "heartbeat":
              return c.heartbeat(run, who, lagging)
            case "reconfirm":
              return c.reconfirm(run, who, now)
            case "release":
              return c.release(run, who)
            case "steal":
              return c.steal(run, who, now, evidence)
            case "recover":
              return c.recover(run, evidence.expectedOwner, generation, who, now, evidence)
            case "guard":
              return Effect.as(c.guard(run, who), "held")
          }
        }
        const left = yield* Effect.either(apply(local))
        const right = yield* Effect.either(apply(remote))
        const show = (result: typeof left) => result._tag === "Right" ? result.right : result.left.code
        expect(show(right), `step ${step}: ${op} ${run} ${who.nonce} at ${now}`).toEqual(show(left))
        const outcome = left._tag === "Right" ? left.right as { _tag?: string; reason?: string } | undefined : undefined
        if (outcome?._tag === "Granted") {
          grants.push(now)
          lastGrantee = who
        }
        if (outcome?._tag === "Activated") lastOwner = who
        seen.add(`${op}:${outcome?.reason ?? outcome?._tag ?? show(left)}`)
        for (const r of runs) {
          for (const o of owners) {
            const l = yield* Effect.either(local.guard(r, o))
            const g = yield* Effect.either(remote.guard(r, o))
            expect(g._tag, `step ${step}: guard ${r} ${o.nonce}`).toBe(l._tag)
          }
        }
      }
      // The walk reached every interesting branch, including both sides of the staleness cutoff.
      for (
        const branch of [
          "claim:Granted", "claim:already_claimed", "claim:owner_held", "activate:Activated", "activate:Lost",
          "heartbeat:Renewed", "reconfirm:Lost", "steal:Granted", "steal:owner_live", "steal:evidence_invalid",
          "steal:already_claimed", "recover:Recovered", "recover:claim_fresh", "recover:claim_changed", "guard:held",
          "guard:fence_lost"
        ]
      ) expect(seen.has(branch), `${branch} in ${[...seen].join(" ")}`).toBe(true)
    }).pipe(Effect.scoped), walkTimeout)

  it.effect("extreme owners and times round-trip: safe-integer pids and clocks, 1024-unit non-ASCII ids", () =>
    Effect.gen(function*() {
      const local = yield* Consensus.makeLocal
      const sqlLayer = Layer.provideMerge(SqlConsensus.layer, Layer.provideMerge(Migrations.layer, database()))
      const remote = Context.get(yield* Layer.build(sqlLayer), Consensus.Consensus)
      const big: OwnerId = { hostId: "h\u00e9\u{1F600}".padEnd(1024, "x"), pid: Number.MAX_SAFE_INTEGER, nonce: "n".repeat(1024) }
      const near: OwnerId = { ...big, pid: Number.MAX_SAFE_INTEGER - 1 }
      const thief: OwnerId = { hostId: "other", pid: 0, nonce: "t" }
      const t0 = Number.MAX_SAFE_INTEGER - 2 * S - 10
      const run = "r\u{1F600}".padEnd(1024, "z")
      const script = (c: Consensus.Service) =>
        Effect.gen(function*() {
          const out: Array<unknown> = []
          out.push(yield* c.claim(run, big, t0))
          out.push(yield* c.activate(run, big, t0, t0))
          out.push(yield* Effect.either(c.guard(run, near)))
          out.push(yield* Effect.either(c.guard(run, big)))
          out.push(yield* c.heartbeat(run, big, t0 + 5))
          out.push(yield* c.heartbeat(run, near, t0 + 6))
          const at = t0 + 5 + S
          out.push(yield* c.steal(run, thief, at, { expectedOwner: big, checkedAtMs: at, kind: "lease-expired" }))
          out.push(yield* c.steal(run, thief, at + 1, { expectedOwner: big, checkedAtMs: at + 1, kind: "lease-expired" }))
          out.push(yield* c.activate(run, thief, at + 1, Number.MAX_SAFE_INTEGER))
          out.push(yield* c.heartbeat(run, thief, Number.MAX_SAFE_INTEGER))
          out.push(yield* Effect.either(c.guard(run, big)))
          return out.map((item) => JSON.parse(JSON.stringify(item, (_, v) => v?._tag === "Left" ? v.left.code : v)))
        })
      const expected = yield* script(local)
      expect(yield* script(remote)).toEqual(expected)
      expect(expected[6]).toEqual({ _tag: "Rejected", reason: "owner_live" })
      expect(expected[7]).toEqual({ _tag: "Granted", grantedAtMs: t0 + 6 + S })
      expect(expected[9]).toEqual({ _tag: "Renewed", heartbeatAtMs: Number.MAX_SAFE_INTEGER })
    }).pipe(Effect.scoped), probeTimeout)
})

agree("SQLite", () => TestDatabase.layer, 2000)
describe.skipIf(pgUrl === undefined)("PostgreSQL", () => {
  agree("PostgreSQL", () => TestDatabase.layerPostgres(pgUrl!), 2000)
})
