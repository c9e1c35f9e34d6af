/**
 * `Journal.prepareAppend` over one database: entries appended inside another store's write, published once
 * it commits, and refused input that writes nothing.
 */
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as Consensus from "@baton/journal/Consensus"
import * as Journal from "@baton/journal/Journal"
import * as Migrations from "@baton/journal/Migrations"
import * as SqlJournal from "@baton/journal/SqlJournal"
import type * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Queue } from "effect"

export const preparedAppendSuite = (database: () => Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, unknown>) => {
  const stack = () =>
    Layer.provideMerge(
      SqlJournal.layerWith(),
      Layer.provideMerge(Consensus.layerLocal, Layer.provideMerge(Migrations.layer, database()))
    )
  const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, stack()) as Effect.Effect<A, unknown>
  const input = (n: number) => ({ runId: "r", sourceId: "s", eventType: "e", payload: { n } })

  it.effect("appends every entry after the stream's head and source floor, publishing after commit", () =>
    run(Effect.scoped(Effect.gen(function*() {
      const journal = yield* Journal.Journal
      const changes = yield* journal.changes
      yield* journal.emitDurableUnfenced(input(0))
      const prepared = yield* journal.prepareAppend([input(1), input(2), input(3)])
      yield* journal.transact(prepared.append, { key: "r" })
      const page = yield* journal.entries({ runId: "r", limit: 100 })
      expect(page.entries.map((e) => [e.seq, e.sourceSeq, e.payload])).toEqual([
        [0, 0, { n: 0 }],
        [1, 1, { n: 1 }],
        [2, 2, { n: 2 }],
        [3, 3, { n: 3 }]
      ])
      const published = Chunk.toReadonlyArray(yield* Queue.takeAll(changes))
      expect(published.map((e) => e.eventId)).toEqual(page.entries.map((e) => e.eventId))
      // The next ordinary append continues after the prepared ones.
      const next = yield* journal.emitDurableUnfenced(input(4))
      expect(next).toMatchObject({ _tag: "Accepted", seq: 4, sourceSeq: 4 })
    }))))

  it.effect("refuses mixed runs, a caller's sourceSeq and an empty list, naming the field; nothing is written", () =>
    run(Effect.gen(function*() {
      const journal = yield* Journal.Journal
      const mixed = yield* Effect.flip(journal.prepareAppend([input(1), { ...input(2), runId: "other" }]))
      expect([mixed.code, mixed.field]).toEqual(["invalid_event", "inputs"])
      const seq = yield* Effect.flip(journal.prepareAppend([{ ...input(1), sourceSeq: 7 }]))
      expect([seq.code, seq.field]).toEqual(["invalid_event", "inputs.sourceSeq"])
      const empty = yield* Effect.flip(journal.prepareAppend([]))
      expect([empty.code, empty.field]).toEqual(["invalid_event", "inputs"])
      expect((yield* journal.entries({ runId: "r", limit: 100 })).entries).toEqual([])
      expect((yield* journal.entries({ runId: "other", limit: 100 })).entries).toEqual([])
    })))
}
