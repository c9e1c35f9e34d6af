import { Journal } from "@baton/journal/Journal"
import * as TestJournal from "@baton/journal/TestJournal"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Queue } from "effect"
import { rows } from "./support/owners.js"

const lossy = (n: number, sourceSeq?: number) => ({
  runId: "r",
  sourceId: "telemetry",
  eventType: "tick",
  payload: { n },
  ...(sourceSeq === undefined ? {} : { sourceSeq })
})

describe("lossy channel under pressure", () => {
  it.effect("a producer at 10x the drain rate: bounded backlog, drops reported, durable order kept", () =>
    Effect.gen(function*() {
      const capacity = 16
      const batchSize = 1
      const journal = yield* Journal
      const changes = yield* journal.changes
      let accepted = 0
      let dropped = 0
      let durable = 0
      let committedThrough = -1
      let maxBacklog = 0
      const durableSeqs: Array<number> = []
      for (let round = 0; round < 100; round++) {
        // Ten emits per committed batch of one entry: ten times the drain rate.
        for (let k = 0; k < 10; k++) {
          const receipt = yield* journal.emitLossy(lossy(round * 10 + k))
          if (receipt._tag === "Accepted") accepted++
          else if (receipt._tag === "Dropped") dropped++
          maxBacklog = Math.max(maxBacklog, accepted + durable - (committedThrough + 1))
        }
        if (round % 10 === 0) {
          durableSeqs.push((yield* journal.emitDurableUnfenced({ ...lossy(-round), sourceId: "lifecycle" })).seq)
          durable++
        }
        // Commits of run r have contiguous seqs, so the highest published seq counts them
        // even if the sliding subscription dropped some notifications.
        const published = [yield* Queue.take(changes), ...(yield* Queue.takeAll(changes))]
        for (const entry of published) committedThrough = Math.max(committedThrough, entry.seq)
      }
      yield* journal.flush
      expect(accepted + dropped).toBe(1000)
      expect(dropped).toBeGreaterThan(0)
      expect(maxBacklog).toBeLessThanOrEqual(capacity + batchSize)
      const stored = yield* rows("r")
      expect(stored.map((row) => row.seq)).toEqual(Array.from({ length: accepted + durable }, (_, i) => i))
      expect(stored.filter((row) => row.source_id === "telemetry").length).toBe(accepted)
      const durableStored = stored.filter((row) => row.source_id === "lifecycle")
      expect(durableStored.map((row) => row.seq)).toEqual(durableSeqs)
      expect([...durableSeqs].sort((a, b) => a - b)).toEqual(durableSeqs)
    }).pipe(Effect.scoped, Effect.provide(TestJournal.layer({ capacity: 16, batchSize: 1, overflow: "drop-newest" }))))

  const blocked = (overflow: "drop-newest" | "drop-oldest") =>
    it.effect(`with the writer blocked, ${overflow} never holds more than capacity`, () =>
      Effect.gen(function*() {
        const journal = yield* Journal
        const entered = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(
          journal.transact(Deferred.succeed(entered, undefined).pipe(Effect.zipRight(Deferred.await(release))))
        )
        yield* Deferred.await(entered)
        const receipts = []
        for (let n = 0; n < 500; n++) receipts.push(yield* journal.emitLossy(lossy(n, n)))
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        yield* journal.flush
        const stored = (yield* rows("r")).map((row) => row.source_seq)
        if (overflow === "drop-newest") {
          expect(receipts.filter((r) => r._tag === "Dropped").length).toBe(492)
          expect(stored).toEqual(Array.from({ length: 8 }, (_, i) => i))
        } else {
          expect(receipts.filter((r) => r._tag === "Accepted" && r.evicted === 1).length).toBe(492)
          expect(stored).toEqual(Array.from({ length: 8 }, (_, i) => 492 + i))
        }
      }).pipe(Effect.provide(TestJournal.layer({ capacity: 8, overflow }))))
  blocked("drop-newest")
  blocked("drop-oldest")

  it.effect("lossy identities: pending and committed duplicates, conflicts from the cache", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(
        journal.transact(Deferred.succeed(entered, undefined).pipe(Effect.zipRight(Deferred.await(release))))
      )
      yield* Deferred.await(entered)
      expect(yield* journal.emitLossy(lossy(1, 5))).toEqual({ _tag: "Accepted", sourceSeq: 5 })
      expect(yield* journal.emitLossy(lossy(1, 5))).toEqual({ _tag: "Duplicate", sourceSeq: 5, status: "pending" })
      expect((yield* Effect.flip(journal.emitLossy(lossy(2, 5)))).code).toBe("idempotency_conflict")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* journal.flush
      expect(yield* journal.emitLossy(lossy(1, 5))).toEqual({ _tag: "Duplicate", sourceSeq: 5, seq: 0, status: "committed" })
      expect(yield* journal.emitLossy({ ...lossy(9, 5), dedupe: "identity" })).toMatchObject({ _tag: "Duplicate" })
      // Rows the cache no longer holds (bound 1): the writer collapses a same-content
      // collision silently, without a row or a reported loss.
      yield* journal.emitDurableUnfenced({ ...lossy(3, 9) })
      yield* journal.emitDurableUnfenced({ ...lossy(4, 10) })
      yield* journal.emitLossy(lossy(3, 9))
      yield* journal.flush
      expect((yield* rows("r")).map((row) => row.source_seq)).toEqual([5, 9, 10])
    }).pipe(Effect.provide(TestJournal.layer({ identityCache: 1 }))))

  it.effect("a content conflict found by the writer is reported through flush", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      yield* journal.emitDurableUnfenced(lossy(1, 0))
      yield* journal.emitDurableUnfenced(lossy(2, 1))
      // identityCache 1 keeps only the newest identity, so (r, telemetry, 0) is a cache miss.
      expect(yield* journal.emitLossy(lossy(99, 0))).toEqual({ _tag: "Accepted", sourceSeq: 0 })
      const error = yield* Effect.flip(journal.flush)
      expect(error.code).toBe("idempotency_conflict")
      yield* journal.flush
      expect((yield* rows("r")).map((row) => row.payload_json)).toEqual([`{"n":1}`, `{"n":2}`])
    }).pipe(Effect.provide(TestJournal.layer({ identityCache: 1 }))))
})
