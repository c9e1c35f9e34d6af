import { Journal } from "@baton/journal/Journal"
import * as TestJournal from "@baton/journal/TestJournal"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { rows } from "./support/owners.js"

const input = (runId: string, payload: unknown, extra: Record<string, unknown> = {}) => ({
  runId,
  sourceId: "s",
  eventType: "test.event",
  payload,
  ...extra
})

describe("durable channel", () => {
  it.effect("check 1: two unfenced appends get seqs 0 and 1 and page back in order", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      const first = yield* journal.emitDurableUnfenced(input("r", { n: 1 }))
      const second = yield* journal.emitDurableUnfenced(input("r", { n: 2 }))
      expect(first).toEqual({ _tag: "Accepted", seq: 0, sourceSeq: 0 })
      expect(second).toEqual({ _tag: "Accepted", seq: 1, sourceSeq: 1 })
      const page = yield* journal.entries({ runId: "r", limit: 10 })
      expect(page.hasMore).toBe(false)
      expect(page.entries.map((entry) => [entry.seq, entry.payload])).toEqual([[0, { n: 1 }], [1, { n: 2 }]])
    }).pipe(Effect.provide(TestJournal.layer())))

  it.effect("check 2: payloads are stored as canonical JSON", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      yield* journal.emitDurableUnfenced(input("r", { b: 2, a: { d: 1, c: new Date(0) } }))
      const stored = yield* rows("r")
      expect(stored[0]?.payload_json).toBe(`{"a":{"c":"1970-01-01T00:00:00.000Z","d":1},"b":2}`)
      expect(stored[0]?.meta_json).toBe("null")
    }).pipe(Effect.provide(TestJournal.layer())))
})
