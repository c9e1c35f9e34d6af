/**
 * Adversarial probes of the guarantees docs/journal.md states, written from the
 * public surface only: admission errors, cross-connection idempotency, cursor
 * boundaries and refusals that must write nothing. Fencing across connections
 * and the differential run of `Consensus.layerLocal` against the SQL strategy
 * need the run row, so they run in the run store's tests.
 */
import type { DurableWriter } from "@baton/database/DurableWriter"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as Consensus from "@baton/journal/Consensus"
import { Journal } from "@baton/journal/Journal"
import * as TestJournal from "@baton/journal/TestJournal"
import type * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Effect, Fiber, Layer, type Scope, Stream } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { A, count, ev, own, rows } from "./support/owners.js"
import { pgHosts } from "./support/pgHosts.js"

type Stack = Context.Context<Journal | Consensus.Consensus | DurableWriter | SqlClient.SqlClient>

// Every test names its timeout: a run outside the workspace config (a package's own `vitest run`)
// would otherwise get vitest's 5 s. Sized for a loaded 2-core machine: a probe is one scenario
// (well under a second idle); a walk or race across connections is bounded by its iteration
// count, never by time.
const probeTimeout = 60_000
const walkTimeout = 240_000

const tempFile = () => path.join(mkdtempSync(path.join(tmpdir(), "baton-break-")), "journal.db")
const on = <A, E>(host: Stack, effect: Effect.Effect<A, E, any>) => Effect.provide(effect, host) as Effect.Effect<A, E>
const journalOf = (host: Stack) => Context.get(host, Journal)

/** Two independent stacks (connection, journal, in-memory Consensus) over one SQLite file. */
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
