/**
 * Integrity of what the journal reads back and of its lossy writer, written
 * once and run on SQLite and PostgreSQL: rows planted with raw SQL that break
 * the ranges the types promise are `decode_failed`, a row already at the
 * allocated seq is `sequence_conflict`, and a writer killed by a defect fails
 * flushes with `sink_failed` instead of hanging them (and the journal's close).
 */
import { DurableWriter } from "@baton/database/DurableWriter"
import type { Consensus } from "@baton/journal/Consensus"
import { Journal, type JournalError } from "@baton/journal/Journal"
import { makeEventId } from "@baton/journal/JournalEvent"
import * as TestJournal from "@baton/journal/TestJournal"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer } from "effect"
import { A, count, ev, own, rows } from "./owners.js"

type Database = Layer.Layer<SqlClient.SqlClient | DurableWriter, unknown>
type Env = Journal | Consensus | DurableWriter | SqlClient.SqlClient

const max = Number.MAX_SAFE_INTEGER

/** A switch that makes every write body die (a defect, not a typed failure) while it is on. */
interface Switch {
  on: boolean
}

/** `database` with its writer wrapped: while `dying.on`, each write body dies inside its transaction. */
const withDyingWriter = (database: Database, dying: Switch): Database =>
  Layer.effectContext(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter
    const wrapped = DurableWriter.of({
      write: (body, options) =>
        writer.write(Effect.suspend(() => dying.on ? Effect.dieMessage("injected writer defect") : body), options),
      statement: writer.statement
    })
    return Context.make(SqlClient.SqlClient, sql).pipe(Context.add(DurableWriter, wrapped))
  })).pipe(Layer.provide(database))

/** Insert an events row directly, bypassing the journal (and its head). */
const plantRow = (row: { runId: string; seq: number; sourceId: string; sourceSeq: number; marker?: string }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const payload = JSON.stringify({ marker: row.marker ?? "planted-payload" })
    yield* sql`INSERT INTO flows_journal_events
      (run_id, seq, event_id, source_id, source_seq, emitted_at_ms, event_type, payload_json, meta_json)
      VALUES (${row.runId}, ${row.seq}, ${makeEventId(row.runId, row.sourceId, row.sourceSeq)}, ${row.sourceId},
        ${row.sourceSeq}, 0, 'x', ${payload}, 'null')`
  })

const expectDecodeFailed = (error: JournalError, column: string) => {
  expect(error.code, error.message).toBe("decode_failed")
  expect(error.message).toContain(`${column}:`)
  expect(error.message).not.toContain("planted-payload")
}

export const integrityContract = (name: string, database: () => Database, timeout?: number) =>
  describe(`Journal integrity: ${name}`, () => {
    const test = (title: string, body: Effect.Effect<void, unknown, Env>) =>
      it.effect(
        title,
        () => body.pipe(Effect.provide(TestJournal.layerOn(database())), Effect.scoped) as Effect.Effect<void, unknown>,
        timeout
      )

    it.effect(
      "a lossy writer defect fails pending and later flushes with sink_failed, and the scope still closes",
      () =>
        Effect.gen(function*() {
          const dying: Switch = { on: false }
          const outcome = yield* Effect.gen(function*() {
            const journal = yield* Journal
            expect(yield* journal.emitDurableUnfenced(ev("r", { n: 0 }))).toMatchObject({ seq: 0 })
            dying.on = true
            expect(yield* journal.emitLossy(ev("r", { n: 1 }))).toMatchObject({ _tag: "Accepted" })
            const pending = yield* Effect.flip(journal.flush)
            expect(pending.code, pending.message).toBe("sink_failed")
            // The writer is gone: later flushes fail too, and the channel takes nothing it could not write.
            expect((yield* Effect.flip(journal.flush)).code).toBe("sink_failed")
            expect((yield* Effect.flip(journal.emitLossy(ev("r", { n: 2 })))).code).toBe("sink_failed")
            dying.on = false
            // The durable channel does not depend on the writer fiber; the lost entry left no row.
            expect(yield* journal.emitDurableUnfenced(ev("r", { n: 3 }))).toMatchObject({ seq: 1 })
            expect((yield* rows("r")).map((row) => JSON.parse(row.payload_json).n)).toEqual([0, 3])
            return "closed"
          }).pipe(Effect.provide(TestJournal.layerOn(withDyingWriter(database(), dying))), Effect.exit)
          // Reaching here means the layer's scope (whose finalizer flushes) closed.
          expect(outcome).toEqual(Exit.succeed("closed"))
        }),
      timeout ?? 10_000
    )

    it.effect(
      "closing the journal after a lossy writer defect ends instead of waiting on its flush",
      () =>
        Effect.gen(function*() {
          const dying: Switch = { on: true }
          const outcome = yield* Effect.gen(function*() {
            const journal = yield* Journal
            expect(yield* journal.emitLossy(ev("r", { n: 1 }))).toMatchObject({ _tag: "Accepted" })
            return "closed"
          }).pipe(Effect.provide(TestJournal.layerOn(withDyingWriter(database(), dying))), Effect.exit)
          expect(outcome).toEqual(Exit.succeed("closed"))
        }),
      timeout ?? 10_000
    )

    test(
      "entries refuses a stored seq or source_seq of Number.MAX_SAFE_INTEGER with decode_failed",
      Effect.gen(function*() {
        const journal = yield* Journal
        yield* plantRow({ runId: "p", seq: max, sourceId: "s", sourceSeq: 0 })
        expectDecodeFailed(yield* Effect.flip(journal.entries({ runId: "p", limit: 10 })), "seq")
        yield* plantRow({ runId: "q", seq: 0, sourceId: "s", sourceSeq: max })
        expectDecodeFailed(yield* Effect.flip(journal.entries({ runId: "q", limit: 10 })), "source_seq")
        // The largest values the types admit still decode.
        yield* plantRow({ runId: "ok", seq: max - 1, sourceId: "s", sourceSeq: max - 1 })
        const page = yield* journal.entries({ runId: "ok", limit: 10 })
        expect(page.entries.map((entry) => [entry.seq, entry.sourceSeq])).toEqual([[max - 1, max - 1]])
      })
    )

    test(
      "a re-emitted identity whose stored seq is Number.MAX_SAFE_INTEGER is decode_failed, not a Duplicate",
      Effect.gen(function*() {
        const journal = yield* Journal
        const sql = yield* SqlClient.SqlClient
        yield* plantRow({ runId: "p", seq: max, sourceId: "s", sourceSeq: 0, marker: "m" })
        const input = { ...ev("p", { marker: "m" }), sourceSeq: 0 }
        expectDecodeFailed(yield* Effect.flip(journal.emitDurableUnfenced(input)), "seq")
        yield* sql`INSERT INTO flows_journal_dedup (run_id, source_id, source_seq, event_id, seq, content_hash)
          VALUES ('t', 's', 0, ${makeEventId("t", "s", 0)}, ${max}, ${"0".repeat(64)})`
        const tombstoned = { ...ev("t", { marker: "m" }), sourceSeq: 0 }
        expectDecodeFailed(yield* Effect.flip(journal.emitDurableUnfenced(tombstoned)), "seq")
        expect(yield* count("flows_journal_events")).toBe(1)
      })
    )

    test(
      "an implicit sourceSeq above a stored source_seq of Number.MAX_SAFE_INTEGER is decode_failed",
      Effect.gen(function*() {
        const journal = yield* Journal
        yield* plantRow({ runId: "p", seq: 0, sourceId: "s", sourceSeq: max })
        expectDecodeFailed(yield* Effect.flip(journal.emitDurableUnfenced(ev("p", { n: 1 }))), "source_seq")
        expect(yield* count("flows_journal_events")).toBe(1)
      })
    )

    test(
      "a stored checkpoint seq of Number.MAX_SAFE_INTEGER is decode_failed for latestCheckpoint and entries",
      Effect.gen(function*() {
        const journal = yield* Journal
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO flows_journal_checkpoints (run_id, seq, state_json, created_at_ms, compacted_at_ms)
          VALUES ('p', ${max}, '{}', 0, 0)`
        expectDecodeFailed(yield* Effect.flip(journal.latestCheckpoint("p")), "seq")
        // The compaction floor is a checkpoint seq too.
        expectDecodeFailed(yield* Effect.flip(journal.entries({ runId: "p", limit: 10 })), "seq")
      })
    )

    test(
      "a head at the end of the sequence space refuses appends: sequence_conflict at MAX_SAFE_INTEGER - 1, decode_failed above",
      Effect.gen(function*() {
        const journal = yield* Journal
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO flows_journal_heads (run_id, next_seq) VALUES ('full', ${max - 1}), ('bad', ${max})`
        const full = yield* Effect.flip(journal.emitDurableUnfenced(ev("full", { n: 1 })))
        expect(full.code, full.message).toBe("sequence_conflict")
        expectDecodeFailed(yield* Effect.flip(journal.emitDurableUnfenced(ev("bad", { n: 1 }))), "next_seq")
        expect(yield* count("flows_journal_events")).toBe(0)
      })
    )

    test(
      "a row already at the allocated seq fails sequence_conflict naming the cause, on both channels",
      Effect.gen(function*() {
        const journal = yield* Journal
        const sql = yield* SqlClient.SqlClient
        expect(yield* journal.emitDurableUnfenced(ev("r", { n: 0 }))).toMatchObject({ seq: 0 })
        // The head says 1 is next, but a row sits there already.
        yield* plantRow({ runId: "r", seq: 1, sourceId: "other", sourceSeq: 0 })
        const durable = yield* Effect.flip(journal.emitDurableUnfenced(ev("r", { n: 1 })))
        expect(durable.code, durable.message).toBe("sequence_conflict")
        expect(durable.message).toContain("already has an entry at seq 1")
        yield* own("r", A)
        expect((yield* Effect.flip(journal.emitDurable(ev("r", { n: 2 }), A))).code).toBe("sequence_conflict")
        expect(yield* journal.emitLossy(ev("r", { n: 3 }))).toMatchObject({ _tag: "Accepted" })
        const lossy = yield* Effect.flip(journal.flush)
        expect(lossy.code, lossy.message).toBe("sequence_conflict")
        expect(lossy.message).toContain("already has an entry at seq 1")
        // Nothing was written: the two rows are the first emit and the planted one, the head is unmoved.
        expect((yield* rows("r")).map((row) => [row.seq, row.source_id])).toEqual([[0, "s"], [1, "other"]])
        const head = yield* sql<{ next_seq: unknown }>`SELECT next_seq FROM flows_journal_heads WHERE run_id = 'r'`
        expect(Number(head[0]?.next_seq)).toBe(1)
        // The lossy channel keeps working after reporting the loss.
        yield* journal.flush
      })
    )
  })
