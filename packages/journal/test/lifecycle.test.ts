import * as TestDatabase from "@baton/database/TestDatabase"
import * as Consensus from "@baton/journal/Consensus"
import * as Journal from "@baton/journal/Journal"
import * as Migrations from "@baton/journal/Migrations"
import * as SqlJournal from "@baton/journal/SqlJournal"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Queue, Scope, Stream } from "effect"
import { A, count, own } from "./support/owners.js"

const database = Layer.merge(Consensus.layerLocal, Layer.provideMerge(Migrations.layer, TestDatabase.layer))

describe("lifecycle", () => {
  it.effect("check 34: closing flushes queued lossy entries, then every operation fails journal_closed", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(SqlJournal.layerWith({ capacity: 16 }), scope)
      const journal = Context.get(context, Journal.Journal)
      for (let n = 0; n < 5; n++) {
        yield* journal.emitLossy({ runId: "r", sourceId: "s", sourceSeq: n, eventType: "n", payload: { n } })
      }
      yield* Scope.close(scope, Exit.void)
      expect(yield* count("flows_journal_events")).toBe(5)
      const input = { runId: "r", sourceId: "s", eventType: "n", payload: {} }
      yield* own("r", A)
      const failures = [
        yield* Effect.flip(journal.emitDurableUnfenced(input)),
        yield* Effect.flip(journal.emitDurable(input, A)),
        yield* Effect.flip(journal.emitLossy(input)),
        yield* Effect.flip(journal.flush),
        yield* Effect.flip(journal.transact(Effect.void)),
        yield* Effect.flip(journal.entries({ runId: "r", limit: 1 })),
        yield* Effect.flip(journal.stream({ runId: "r" }).pipe(Stream.runDrain)),
        yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 0, state: {} }, A)),
        yield* Effect.flip(journal.latestCheckpoint("r")),
        yield* Effect.flip(journal.compact({ runId: "r" }, A))
      ]
      expect(failures.map((error) => (error as Journal.JournalError).code)).toEqual(Array(10).fill("journal_closed"))
    }).pipe(Effect.provide(database)))

  it.effect("bad options fail construction with invalid_event naming the option", () =>
    Effect.gen(function*() {
      for (const [options, field] of [
        [{ capacity: 0 }, "options.capacity"],
        [{ batchSize: 1.5 }, "options.batchSize"],
        [{ identityCache: -1 }, "options.identityCache"],
        [{ maxEntryBytes: Number.MAX_SAFE_INTEGER + 1 }, "options.maxEntryBytes"],
        [{ overflow: "sometimes" }, "options.overflow"],
        [{ pollInterval: "0 millis" }, "options.pollInterval"]
      ] as const) {
        const error = yield* Effect.flip(Layer.build(SqlJournal.layerWith(options as SqlJournal.SqlJournalOptions)))
        expect(error.code).toBe("invalid_event")
        expect(error.field).toBe(field)
      }
    }).pipe(Effect.provide(database), Effect.scoped))

  it.effect("makeNoop fails journal_closed except transact, whenCommitted and changes", () =>
    Effect.gen(function*() {
      const noop = Journal.makeNoop()
      expect((yield* Effect.flip(noop.emitDurableUnfenced({ runId: "r", sourceId: "s", eventType: "n", payload: 1 }))).code)
        .toBe("journal_closed")
      expect(yield* noop.transact(Effect.succeed(7))).toBe(7)
      expect(yield* noop.whenCommitted(Effect.void)).toBe(true)
      const changes = yield* noop.changes
      expect(yield* Queue.size(changes)).toBe(0)
    }).pipe(Effect.scoped))

  it.effect("layerLocal fences the SQL journal through one shared build", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.Journal
      yield* own("r", A)
      expect(yield* journal.emitDurable({ runId: "r", sourceId: "s", eventType: "n", payload: {} }, A)).toMatchObject({
        seq: 0
      })
    }).pipe(
      Effect.provide(
        Layer.provideMerge(
          SqlJournal.layerWith(),
          Layer.merge(Consensus.layerLocal, Layer.provideMerge(Migrations.layer, TestDatabase.layer))
        )
      )
    ))
})
