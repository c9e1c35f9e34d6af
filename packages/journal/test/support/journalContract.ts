/**
 * Journal acceptance checks written once and run on SQLite (in-memory) and
 * PostgreSQL (a fresh schema per test). `makeLayer` builds the journal stack:
 * Journal, Consensus, DurableWriter, SqlClient. The journal's own suites fence
 * through `Consensus.layerLocal`; the run store's run the same checks over its
 * row-backed `SqlConsensus`, creating the run rows first (`prepare`).
 */
import { DurableWriter } from "@baton/database/DurableWriter"
import { Consensus } from "@baton/journal/Consensus"
import * as Journal from "@baton/journal/Journal"
import type { SqlJournalOptions } from "@baton/journal/SqlJournal"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, type Layer, Option, Queue, type Scope, Stream, TestClock } from "effect"
import { A, B, count, ev, own, rows, S } from "./owners.js"

type Env = Journal.Journal | Consensus | DurableWriter | SqlClient.SqlClient

export const journalContract = (
  name: string,
  makeLayer: (options?: SqlJournalOptions) => Layer.Layer<Env, unknown>,
  settings: {
    readonly timeout?: number
    /** Runs before each test, e.g. to create the run `r` a row-backed strategy needs. */
    readonly prepare?: Effect.Effect<void, unknown, Env>
  } = {}
) =>
  describe(`Journal contract: ${name}`, () => {
    const test = (
      title: string,
      body: (journal: Journal.Service) => Effect.Effect<void, unknown, Env | Scope.Scope>,
      options: SqlJournalOptions = {}
    ) =>
      it.effect(
        title,
        () =>
          Effect.gen(function*() {
            if (settings.prepare !== undefined) yield* settings.prepare
            yield* body(yield* Journal.Journal)
          }).pipe(Effect.provide(makeLayer(options)), Effect.scoped) as Effect.Effect<void, unknown>,
        settings.timeout
      )

    test("check 1: unfenced appends get seqs 0, 1 and page back in order", (journal) =>
      Effect.gen(function*() {
        expect(yield* journal.emitDurableUnfenced(ev("r", { n: 1 }))).toEqual({ _tag: "Accepted", seq: 0, sourceSeq: 0 })
        expect(yield* journal.emitDurableUnfenced(ev("r", { n: 2 }))).toEqual({ _tag: "Accepted", seq: 1, sourceSeq: 1 })
        const page = yield* journal.entries({ runId: "r", limit: 10 })
        expect(page.hasMore).toBe(false)
        expect(page.entries.map((e) => [e.seq, e.sourceSeq, e.payload])).toEqual([[0, 0, { n: 1 }], [1, 1, { n: 2 }]])
      }))

    test("check 2: payloads are stored as canonical JSON", (journal) =>
      Effect.gen(function*() {
        yield* journal.emitDurableUnfenced(ev("r", { b: 2, a: { d: 1, c: new Date(0) } }))
        expect((yield* rows("r"))[0]?.payload_json).toBe(`{"a":{"c":"1970-01-01T00:00:00.000Z","d":1},"b":2}`)
      }))

    test("check 3: payloads are redacted before they are stored", (journal) =>
      Effect.gen(function*() {
        const github = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
        yield* journal.emitDurableUnfenced(ev("r", {
          token: github,
          note: "Bearer abcdef.ghi",
          inputTokens: 42,
          idempotencyKey: "k1",
          url: "postgres://u:pw@h/db"
        }))
        const [row] = yield* rows("r")
        expect(row?.payload_json).toBe(
          `{"idempotencyKey":"k1","inputTokens":42,"note":"Bearer [REDACTED_TOKEN]","token":"[REDACTED]",` +
            `"url":"postgres://u:[REDACTED]@h/db"}`
        )
        for (const secret of [github, "abcdef.ghi", ":pw@"]) expect(row?.payload_json.includes(secret)).toBe(false)
      }))

    test("check 4: bad input fails invalid_event naming the field and writes nothing", (journal) =>
      Effect.gen(function*() {
        yield* journal.emitDurableUnfenced(ev("r", { ok: 0 }))
        let deep: unknown = 1
        for (let i = 0; i < 300; i++) deep = [deep]
        const cases: Array<[unknown, string]> = [
          [ev("", {}), "input.runId"],
          [ev("r\uD800", {}), "input.runId"],
          [ev("r\u0000", {}), "input.runId"],
          [ev("r".repeat(1025), {}), "input.runId"],
          [{ ...ev("r", {}), eventType: "" }, "input.eventType"],
          [{ ...ev("r", {}), sourceId: "s\uDC00" }, "input.sourceId"],
          [ev("r", undefined), "input.payload"],
          [ev("r", { big: 1n }), "input.payload"],
          [ev("r", deep), "input.payload"],
          [ev("r", { a: "x".repeat(200) }), "input.payload"],
          [ev("r", { a: "x\u0000y" }), "input.payload"],
          [ev("r", { a: "\uD800" }), "input.payload"],
          [ev("r", { "k\u0000": 1 }), "input.payload"],
          [ev("r", { "\uD800": 1 }), "input.payload"],
          [ev("r", new Map([["a", 1]])), "input.payload"],
          [{ ...ev("r", {}), meta: { m: "\uDFFF" } }, "input.meta"],
          [{ ...ev("r", {}), sourceSeq: -1 }, "input.sourceSeq"],
          [{ ...ev("r", {}), sourceSeq: Number.MAX_SAFE_INTEGER }, "input.sourceSeq"],
          [{ ...ev("r", {}), sourceSeq: 1.5 }, "input.sourceSeq"]
        ]
        for (const [input, field] of cases) {
          const error = yield* Effect.flip(journal.emitDurableUnfenced(input as Journal.Service extends never ? never : any))
          expect(error.code, field).toBe("invalid_event")
          expect(error.field, error.message).toBe(field)
          const lossy = yield* Effect.flip(journal.emitLossy(input as any))
          expect(lossy.code).toBe("invalid_event")
        }
        yield* own("r", A)
        for (const state of [{ a: "x\u0000y" }, { a: "\uD800" }, { "\uD800": 1 }, { "\u0000": 1 }]) {
          const error = yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 0, state }, A))
          expect(error.code).toBe("invalid_event")
          expect(error.field).toBe("options.state")
        }
        expect(yield* count("flows_journal_checkpoints")).toBe(0)
        expect((yield* rows("r")).map((row) => row.seq)).toEqual([0])
        expect(yield* journal.emitDurableUnfenced(ev("r", { ok: 1 }))).toMatchObject({ _tag: "Accepted", seq: 1 })
      }), { maxEntryBytes: 100 })

    test("check 5: a malformed owner fails invalid_event on owner.pid, not fence_lost", (journal) =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(journal.emitDurable(ev("r", {}), { hostId: "h", pid: -1, nonce: "n" }))
        expect(error.code).toBe("invalid_event")
        expect(error.field).toBe("owner.pid")
        expect(yield* count("flows_journal_events")).toBe(0)
      }))

    test("check 6: an owner's fenced append is accepted; a run without a lease fails fence_lost", (journal) =>
      Effect.gen(function*() {
        yield* own("r", A)
        expect(yield* journal.emitDurable(ev("r", {}), A)).toMatchObject({ _tag: "Accepted", seq: 0 })
        const error = yield* Effect.flip(journal.emitDurable(ev("free", {}), A))
        expect(error.code).toBe("fence_lost")
        expect(yield* rows("free")).toEqual([])
        expect(yield* count("flows_journal_events")).toBe(1)
      }))

    test("check 7: after a steal and activation the fence moves to the thief", (journal) =>
      Effect.gen(function*() {
        const consensus = yield* Consensus
        yield* own("r", A)
        for (let i = 0; i < 3; i++) yield* journal.emitDurable(ev("r", { i }), A)
        yield* journal.checkpoint({ runId: "r", seq: 1, state: { at: 1 } }, A)
        const now = S + 1
        const stolen = yield* consensus.steal("r", B, now, {
          expectedOwner: A,
          checkedAtMs: now,
          kind: "cross-host-unreachable-stale"
        })
        expect(stolen).toEqual({ _tag: "Granted", grantedAtMs: now })
        yield* consensus.activate("r", B, now, now)
        expect((yield* Effect.flip(journal.emitDurable(ev("r", { late: true }), A))).code).toBe("fence_lost")
        expect((yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 2, state: {} }, A))).code).toBe("fence_lost")
        expect((yield* Effect.flip(journal.compact({ runId: "r" }, A))).code).toBe("fence_lost")
        expect(yield* journal.emitDurable(ev("r", { thief: true }), B)).toMatchObject({ _tag: "Accepted", seq: 3 })
        yield* journal.checkpoint({ runId: "r", seq: 2, state: {} }, B)
        expect(yield* journal.compact({ runId: "r" }, B)).toEqual({ runId: "r", checkpointSeq: 2, deleted: 2 })
      }))

    test("check 8: the fence outranks dedupe: a displaced owner's retry is fence_lost, never Duplicate", (journal) =>
      Effect.gen(function*() {
        const consensus = yield* Consensus
        yield* own("r", A)
        const input = { ...ev("r", { v: 1 }), sourceSeq: 0 }
        yield* journal.emitDurable(input, A)
        yield* consensus.release("r", A)
        expect((yield* Effect.flip(journal.emitDurable(input, A))).code).toBe("fence_lost")
        yield* own("r", B, 10)
        expect((yield* Effect.flip(journal.emitDurable(input, A))).code).toBe("fence_lost")
        expect((yield* rows("r")).length).toBe(1)
      }))

    test("check 9: identity dedupe: Duplicate on same content, idempotency_conflict on change", (journal) =>
      Effect.gen(function*() {
        const base = { runId: "r", sourceId: "s", sourceSeq: 7, eventType: "x", payload: { a: 1, b: 2 }, meta: { m: 1 } }
        expect(yield* journal.emitDurableUnfenced(base)).toEqual({ _tag: "Accepted", seq: 0, sourceSeq: 7 })
        expect(yield* journal.emitDurableUnfenced({ ...base, payload: { b: 2, a: 1 } })).toEqual({
          _tag: "Duplicate",
          seq: 0,
          sourceSeq: 7,
          status: "committed"
        })
        for (const changed of [{ payload: { a: 2 } }, { meta: { m: 2 } }, { eventType: "y" }]) {
          const error = yield* Effect.flip(journal.emitDurableUnfenced({ ...base, ...changed }))
          expect(error.code).toBe("idempotency_conflict")
        }
        expect(yield* journal.emitDurableUnfenced({ ...base, payload: { a: 3 }, dedupe: "identity" })).toMatchObject({
          _tag: "Duplicate",
          seq: 0
        })
        expect((yield* rows("r")).length).toBe(1)
      }))

    test("check 10: transact is atomic with caller writes", (journal) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE caller_items (id TEXT PRIMARY KEY)`
        const changes = yield* journal.changes
        const input = { ...ev("r", { v: 1 }), sourceSeq: 0 }
        const failed = yield* journal.transact(
          Effect.gen(function*() {
            yield* sql`INSERT INTO caller_items (id) VALUES ('a')`
            yield* journal.emitDurableUnfenced(input)
            return yield* Effect.fail("boom" as const)
          }),
          { key: "r" }
        ).pipe(Effect.flip)
        expect(failed).toBe("boom")
        expect(yield* count("caller_items")).toBe(0)
        expect(yield* rows("r")).toEqual([])
        expect(yield* Queue.size(changes)).toBe(0)
        yield* journal.transact(
          Effect.gen(function*() {
            yield* sql`INSERT INTO caller_items (id) VALUES ('a')`
            expect(yield* journal.emitDurableUnfenced(input)).toMatchObject({ _tag: "Accepted", seq: 0 })
          }),
          { key: "r" }
        )
        expect(yield* count("caller_items")).toBe(1)
        expect((yield* rows("r")).length).toBe(1)
        expect(yield* Queue.size(changes)).toBe(1)
      }))

    test("check 11: publication follows the outermost commit; a caught inner rollback publishes nothing", (journal) =>
      Effect.gen(function*() {
        const changes = yield* journal.changes
        yield* journal.transact(
          Effect.gen(function*() {
            yield* journal.emitDurableUnfenced(ev("r", { v: 1 }))
            expect(yield* Queue.size(changes)).toBe(0)
            const inner = yield* journal.transact(
              journal.emitDurableUnfenced(ev("r", { v: 2 })).pipe(Effect.zipRight(Effect.fail("inner" as const)))
            ).pipe(Effect.flip)
            expect(inner).toBe("inner")
            expect(yield* journal.whenCommitted(Effect.void)).toBe(true)
          }),
          { key: "r" }
        )
        expect(yield* Queue.size(changes)).toBe(1)
        const published = yield* Queue.take(changes)
        expect(published.payload).toEqual({ v: 1 })
        expect(Object.isFrozen(published)).toBe(true)
        expect((yield* rows("r")).map((row) => row.payload_json)).toEqual([`{"v":1}`])
        let ran = false
        expect(yield* journal.whenCommitted(Effect.sync(() => (ran = true)))).toBe(true)
        expect(ran).toBe(true)
      }))

    test("check 12: durable and lossy entries share one sequence", (journal) =>
      Effect.gen(function*() {
        yield* journal.emitDurableUnfenced(ev("r", { c: "durable" }))
        expect(yield* journal.emitLossy(ev("r", { c: "lossy" }))).toEqual({ _tag: "Accepted", sourceSeq: 1 })
        yield* journal.flush
        yield* journal.emitDurableUnfenced(ev("r", { c: "durable" }))
        expect((yield* rows("r")).map((row) => [row.seq, row.payload_json])).toEqual([
          [0, `{"c":"durable"}`],
          [1, `{"c":"lossy"}`],
          [2, `{"c":"durable"}`]
        ])
      }))

    test("check 13: durable then lossy inside transact does not deadlock", (journal) =>
      Effect.gen(function*() {
        yield* journal.transact(
          Effect.gen(function*() {
            yield* journal.emitDurableUnfenced(ev("r", { c: "durable" }))
            yield* journal.emitLossy(ev("r", { c: "lossy" }))
          }),
          { key: "r" }
        )
        yield* journal.flush
        expect((yield* rows("r")).map((row) => [row.seq, row.source_seq, row.payload_json])).toEqual([
          [0, 0, `{"c":"durable"}`],
          [1, 1, `{"c":"lossy"}`]
        ])
      }))

    const overflow = (policy: Journal.OverflowPolicy) =>
      test(`check 14: a full queue under ${policy}`, (journal) =>
        Effect.gen(function*() {
          const entered = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const holder = yield* Effect.fork(
            journal.transact(Deferred.succeed(entered, undefined).pipe(Effect.zipRight(Deferred.await(release))))
          )
          yield* Deferred.await(entered)
          const lossy = (n: number) => journal.emitLossy({ ...ev("r", { n }), sourceSeq: n })
          expect(yield* lossy(0)).toEqual({ _tag: "Accepted", sourceSeq: 0 })
          expect(yield* lossy(1)).toEqual({ _tag: "Accepted", sourceSeq: 1 })
          if (policy === "reject") {
            expect((yield* Effect.flip(lossy(2))).code).toBe("queue_overflow")
          } else if (policy === "drop-newest") {
            expect(yield* lossy(2)).toEqual({ _tag: "Dropped", sourceSeq: 2, policy: "drop-newest" })
          } else {
            expect(yield* lossy(2)).toEqual({ _tag: "Accepted", sourceSeq: 2, evicted: 1 })
          }
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(holder)
          yield* journal.flush
          const stored = (yield* rows("r")).map((row) => row.source_seq)
          expect(stored).toEqual(policy === "drop-oldest" ? [1, 2] : [0, 1])
        }), { capacity: 2, overflow: policy })
    overflow("reject")
    overflow("drop-newest")
    overflow("drop-oldest")

    test("check 15: a lost lossy batch is reported once, then the channel recovers", (journal) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`ALTER TABLE flows_journal_events RENAME TO flows_journal_events_away`
        yield* journal.emitLossy({ ...ev("r", { n: 0 }), sourceSeq: 0 })
        const error = yield* Effect.flip(journal.flush)
        expect(error.code).toBe("sink_failed")
        yield* sql`ALTER TABLE flows_journal_events_away RENAME TO flows_journal_events`
        // @effect/sql-sqlite-node caches failed prepares for 10 minutes (Clock time): let them expire.
        yield* TestClock.adjust("11 minutes")
        yield* journal.flush
        yield* journal.emitLossy({ ...ev("r", { n: 1 }), sourceSeq: 1 })
        yield* journal.flush
        expect((yield* rows("r")).map((row) => row.source_seq)).toEqual([1])
      }))

    test("check 17: paging and filters", (journal) =>
      Effect.gen(function*() {
        for (let i = 0; i < 25; i++) {
          yield* journal.emitDurableUnfenced({ runId: "r", sourceId: "s", eventType: i % 2 === 0 ? "x" : "y", payload: { i } })
        }
        const sizes: Array<[number, boolean]> = []
        let after: number | undefined
        for (;;) {
          const page = yield* journal.entries({ runId: "r", after, limit: 10 })
          sizes.push([page.entries.length, page.hasMore])
          if (!page.hasMore) break
          after = page.entries[page.entries.length - 1]!.seq
        }
        expect(sizes).toEqual([[10, true], [10, true], [5, false]])
        const xs = yield* journal.entries({ runId: "r", eventTypes: ["x", "x"], limit: 100 })
        expect(xs.entries.length).toBe(13)
        expect(xs.entries.every((e) => e.eventType === "x")).toBe(true)
        for (const [options, field] of [
          [{ runId: "r", limit: 0 }, "options.limit"],
          [{ runId: "r", limit: 10_001 }, "options.limit"],
          [{ runId: "r", limit: 1, eventTypes: Array.from({ length: 65 }, (_, i) => `t${i}`) }, "options.eventTypes"],
          [{ runId: "r", limit: 1, eventTypes: [] }, "options.eventTypes"],
          [{ runId: "r", limit: 1, after: -2 }, "options.after"],
          [{ runId: "", limit: 1 }, "options.runId"]
        ] as const) {
          const error = yield* Effect.flip(journal.entries(options))
          expect(error.code).toBe("invalid_event")
          expect(error.field).toBe(field)
        }
      }))

    test("check 19: checkpoints name an existing entry and keep state verbatim", (journal) =>
      Effect.gen(function*() {
        yield* own("r", A)
        yield* journal.emitDurable(ev("r", {}), A)
        const missing = yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 5, state: {} }, A))
        expect(missing.code).toBe("checkpoint_invalid")
        const stored = yield* journal.checkpoint({ runId: "r", seq: 0, state: { apiKey: "x" } }, A)
        expect(stored.state).toEqual({ apiKey: "x" })
        const latest = yield* journal.latestCheckpoint("r")
        expect(Option.map(latest, (cp) => [cp.seq, cp.state, cp.compactedAtMs])).toEqual(
          Option.some([0, { apiKey: "x" }, null])
        )
        expect(yield* journal.latestCheckpoint("other")).toEqual(Option.none())
      }))

    test("check 20: compaction moves entries below the checkpoint to tombstones", (journal) =>
      Effect.gen(function*() {
        yield* own("r", A)
        for (let i = 0; i < 10; i++) yield* journal.emitDurable(ev("r", { i }), A)
        const noCheckpoint = yield* Effect.flip(journal.compact({ runId: "r" }, A))
        expect(noCheckpoint.code).toBe("checkpoint_invalid")
        yield* journal.checkpoint({ runId: "r", seq: 6, state: { upTo: 6 } }, A)
        expect(yield* journal.compact({ runId: "r" }, A)).toEqual({ runId: "r", checkpointSeq: 6, deleted: 6 })
        const compacted = yield* Effect.flip(journal.entries({ runId: "r", limit: 10 }))
        expect(compacted.code).toBe("compacted")
        expect(compacted.checkpointSeq).toBe(6)
        const rest = yield* journal.entries({ runId: "r", after: 5, limit: 10 })
        expect(rest.entries.map((e) => e.seq)).toEqual([6, 7, 8, 9])
        expect(yield* journal.compact({ runId: "r" }, A)).toEqual({ runId: "r", checkpointSeq: 6, deleted: 0 })
        expect(yield* journal.emitDurable(ev("r", {}), A)).toMatchObject({ seq: 10 })
        const belowFloor = yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 6, state: {} }, A))
        expect(belowFloor.code).toBe("checkpoint_invalid")
        expect(belowFloor.checkpointSeq).toBe(6)
        expect(yield* count("flows_journal_dedup")).toBe(6)
      }))

    test("check 21: compaction refuses while an in-process stream still needs older entries", (journal) =>
      Effect.gen(function*() {
        yield* own("r", A)
        for (let i = 0; i < 3; i++) yield* journal.emitDurable(ev("r", { i }), A)
        const atTwo = yield* Deferred.make<void>()
        const follower = yield* Effect.fork(
          journal.stream({ runId: "r" }).pipe(
            Stream.runForEach((entry) => entry.seq === 2 ? Deferred.succeed(atTwo, undefined).pipe(Effect.zipRight(Effect.never)) : Effect.void)
          )
        )
        yield* Deferred.await(atTwo)
        for (let i = 3; i < 10; i++) yield* journal.emitDurable(ev("r", { i }), A)
        yield* journal.checkpoint({ runId: "r", seq: 6, state: {} }, A)
        const error = yield* Effect.flip(journal.compact({ runId: "r" }, A))
        expect(error.code).toBe("reader_behind")
        expect(error.checkpointSeq).toBe(6)
        expect((yield* rows("r")).length).toBe(10)
        yield* Fiber.interrupt(follower)
        expect(yield* journal.compact({ runId: "r" }, A)).toMatchObject({ deleted: 6 })
      }))

    test("check 22: compacted identities still dedupe, and allocation continues above them", (journal) =>
      Effect.gen(function*() {
        yield* own("r", A)
        for (let i = 0; i < 5; i++) yield* journal.emitDurable({ ...ev("r", { i }), sourceSeq: i }, A)
        yield* journal.checkpoint({ runId: "r", seq: 4, state: {} }, A)
        yield* journal.compact({ runId: "r" }, A)
        expect(yield* journal.emitDurable({ ...ev("r", { i: 3 }), sourceSeq: 3 }, A)).toEqual({
          _tag: "Duplicate",
          seq: 3,
          sourceSeq: 3,
          status: "committed"
        })
        expect((yield* Effect.flip(journal.emitDurable({ ...ev("r", { i: 99 }), sourceSeq: 3 }, A))).code).toBe(
          "idempotency_conflict"
        )
        expect(yield* journal.emitDurable(ev("r", { next: true }), A)).toEqual({ _tag: "Accepted", seq: 5, sourceSeq: 5 })
      }))

    test("check 33: control's query reads the three event types and decodes their payloads", (journal) =>
      Effect.gen(function*() {
        const { EventTypes, ForkCreatedPayload, CancelRequestedPayload, EngineInterruptedPayload } = yield* Effect.promise(
          () => import("@baton/journal/JournalEvent")
        )
        const { Schema } = yield* Effect.promise(() => import("effect"))
        yield* journal.emitDurableUnfenced({ runId: "c1", sourceId: "engine", eventType: EventTypes.forkCreated, payload: { parentRunId: "p", forkJournalOffset: 4, childRunId: "c1" } })
        yield* journal.emitDurableUnfenced({ runId: "c1", sourceId: "@baton/control", eventType: EventTypes.cancelRequested, payload: { runId: "c1", source: "control", principal: { id: "local/operator" }, reason: "stop" } })
        yield* journal.emitDurableUnfenced({ runId: "c2", sourceId: "engine", eventType: EventTypes.engineInterrupted, payload: { outcome: "cancelled", interruptedAtMs: 5 } })
        const sql = yield* SqlClient.SqlClient
        const select = (eventType: string) =>
          sql<{ run_id: string; seq: unknown; emitted_at_ms: unknown; payload_json: string }>`
            SELECT run_id, seq, emitted_at_ms, payload_json FROM flows_journal_events
            WHERE event_type = ${eventType} AND run_id IN (${"c1"}, ${"c2"})`
        const forks = yield* select(EventTypes.forkCreated)
        expect(Schema.decodeUnknownSync(ForkCreatedPayload)(JSON.parse(forks[0]!.payload_json))).toEqual({ parentRunId: "p", forkJournalOffset: 4, childRunId: "c1" })
        const cancels = yield* select(EventTypes.cancelRequested)
        expect(Schema.decodeUnknownSync(CancelRequestedPayload)(JSON.parse(cancels[0]!.payload_json))).toMatchObject({ reason: "stop", source: "control" })
        const interrupts = yield* select(EventTypes.engineInterrupted)
        expect(interrupts[0]!.run_id).toBe("c2")
        expect(Number(interrupts[0]!.seq)).toBe(0)
        expect(Number(interrupts[0]!.emitted_at_ms)).toBeGreaterThanOrEqual(0)
        expect(Schema.decodeUnknownSync(EngineInterruptedPayload)(JSON.parse(interrupts[0]!.payload_json))).toEqual({ outcome: "cancelled", interruptedAtMs: 5 })
      }))
  })
