import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import { Journal } from "@baton/journal/Journal"
import * as TestJournal from "@baton/journal/TestJournal"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Effect, Fiber, Layer, Stream } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { A, own } from "./support/owners.js"

const tempFile = () => path.join(mkdtempSync(path.join(tmpdir(), "baton-follower-")), "journal.db")
const append = (journal: Journal["Type"], n: number) =>
  journal.emitDurableUnfenced({ runId: "r", sourceId: "s", eventType: "n", payload: { n } })

describe("follower stream (check 18)", () => {
  it.live("yields history, then this process's appends, then another connection's within a poll interval", () =>
    Effect.gen(function*() {
      const filename = tempFile()
      const here = yield* Layer.build(TestJournal.layerOn(SqliteDatabase.layer({ filename }), { pollInterval: "100 millis" }))
      const there = yield* Layer.build(TestJournal.layerOn(SqliteDatabase.layer({ filename })))
      const journal = Context.get(here, Journal)
      const other = Context.get(there, Journal)
      for (let n = 0; n < 3; n++) yield* append(journal, n)
      const seen: Array<number> = []
      const progress = yield* Deferred.make<void>()
      const follower = yield* Effect.fork(
        journal.stream({ runId: "r" }).pipe(
          Stream.tap((entry) =>
            Effect.sync(() => seen.push(entry.seq)).pipe(
              Effect.zipRight(entry.seq === 2 ? Deferred.succeed(progress, undefined) : Effect.void)
            )
          ),
          Stream.take(5),
          Stream.runCollect
        )
      )
      yield* Deferred.await(progress)
      expect(seen).toEqual([0, 1, 2])
      yield* append(journal, 3)
      yield* append(other, 4)
      const all = yield* Fiber.join(follower)
      expect(Chunk.toReadonlyArray(all).map((entry) => [entry.seq, entry.payload])).toEqual([
        [0, { n: 0 }],
        [1, { n: 1 }],
        [2, { n: 2 }],
        [3, { n: 3 }],
        [4, { n: 4 }]
      ])
    }).pipe(Effect.scoped))

  it.live("starts after afterSequence and fails compacted when its cursor falls below the floor", () =>
    Effect.gen(function*() {
      const ctx = yield* Layer.build(TestJournal.layer())
      const journal = Context.get(ctx, Journal)
      for (let n = 0; n < 4; n++) yield* append(journal, n)
      const tail = yield* journal.stream({ runId: "r", afterSequence: 1 }).pipe(Stream.take(2), Stream.runCollect)
      expect(Chunk.toReadonlyArray(tail).map((entry) => entry.seq)).toEqual([2, 3])
      const bad = yield* Effect.flip(journal.stream({ runId: "r", afterSequence: -5 }).pipe(Stream.runDrain))
      expect(bad.code).toBe("invalid_event")
      expect(bad.field).toBe("options.afterSequence")
      yield* own("r", A).pipe(Effect.provide(ctx))
      yield* journal.checkpoint({ runId: "r", seq: 2, state: {} }, A)
      yield* journal.compact({ runId: "r" }, A)
      const behind = yield* Effect.flip(journal.stream({ runId: "r", afterSequence: 0 }).pipe(Stream.runDrain))
      expect(behind.code).toBe("compacted")
      expect(behind.checkpointSeq).toBe(2)
      const resumed = yield* journal.stream({ runId: "r", afterSequence: 1 }).pipe(Stream.take(2), Stream.runCollect)
      expect(Chunk.toReadonlyArray(resumed).map((entry) => entry.seq)).toEqual([2, 3])
    }).pipe(Effect.scoped))
})
