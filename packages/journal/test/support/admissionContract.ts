/**
 * Strict admission (journal.md 5.1, 9.1 `invalid_event`), written once and run
 * on SQLite and PostgreSQL: a payload, meta or checkpoint state that is not
 * already plain JSON is refused naming the path and the rule, before any write,
 * without consuming a seq or sourceSeq; no caller code runs and no caller
 * exception text reaches the error.
 */
import type { DurableWriter } from "@baton/database/DurableWriter"
import type { Consensus } from "@baton/journal/Consensus"
import * as Journal from "@baton/journal/Journal"
import type { SqlJournalOptions } from "@baton/journal/SqlJournal"
import type * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, type Layer, type Scope, TestClock } from "effect"
import { A, count, own, rows } from "./owners.js"

type Env = Journal.Journal | Consensus | DurableWriter | SqlClient.SqlClient

const ev = (payload: unknown, extra: Record<string, unknown> = {}) => ({
  runId: "r",
  sourceId: "s",
  eventType: "x",
  payload,
  ...extra
})

/** Both channels refuse `input` with `invalid_event` on `field`; the message contains every fragment. */
const refused = (journal: Journal.Service, input: unknown, field: string, ...fragments: Array<string>) =>
  Effect.gen(function*() {
    for (const emit of [journal.emitDurableUnfenced, journal.emitLossy]) {
      const error = yield* Effect.flip(emit(input as Parameters<typeof emit>[0]))
      expect(error.code, fragments.join(" ")).toBe("invalid_event")
      expect(error.field, error.message).toBe(field)
      for (const fragment of fragments) expect(error.message).toContain(fragment)
    }
  })

/** Nothing but the first entry was written, and the next append gets seq 1 and sourceSeq 1. */
const nothingConsumed = (journal: Journal.Service) =>
  Effect.gen(function*() {
    yield* journal.flush
    expect((yield* rows("r")).map((row) => [row.seq, row.source_seq])).toEqual([[0, 0]])
    expect(yield* journal.emitDurableUnfenced(ev({ ok: 1 }))).toEqual({ _tag: "Accepted", seq: 1, sourceSeq: 1 })
  })

class WithToJSON {
  toJSON() {
    return "converted"
  }
}

export const admissionContract = (
  name: string,
  makeLayer: (options?: SqlJournalOptions) => Layer.Layer<Env, unknown>,
  timeout?: number
) =>
  describe(`Journal admission: ${name}`, () => {
    const test = (
      title: string,
      body: (journal: Journal.Service) => Effect.Effect<void, unknown, Env | Scope.Scope>,
      options: SqlJournalOptions = {}
    ) =>
      it.effect(
        title,
        () =>
          Effect.gen(function*() {
            const journal = yield* Journal.Journal
            expect(yield* journal.emitDurableUnfenced(ev({ ok: 0 }))).toMatchObject({ seq: 0, sourceSeq: 0 })
            yield* body(journal)
          }).pipe(Effect.provide(makeLayer(options)), Effect.scoped) as Effect.Effect<void, unknown>,
        timeout
      )

    test("values JSON.stringify would change are refused, naming the path and the rule", (journal) =>
      Effect.gen(function*() {
        yield* refused(journal, ev({ s: Number.NaN }), "input.payload", "input.payload.s:", "NaN is not a JSON number")
        yield* refused(journal, ev({ s: Infinity }), "input.payload", "input.payload.s:", "Infinity")
        yield* refused(journal, ev({ a: [1, -Infinity] }), "input.payload", "input.payload.a[1]:", "-Infinity")
        yield* refused(journal, ev({ s: undefined }), "input.payload", "input.payload.s:", "undefined is not JSON")
        yield* refused(journal, ev({ s: () => 1 }), "input.payload", "input.payload.s:", "a function is not JSON")
        yield* refused(journal, ev({ s: Symbol("x") }), "input.payload", "input.payload.s:", "a symbol is not JSON")
        yield* refused(journal, ev({ s: new WithToJSON() }), "input.payload", "input.payload.s:", "toJSON")
        yield* refused(journal, ev({ s: { toJSON: () => 1 } }), "input.payload", "input.payload.s.toJSON:", "function")
        yield* refused(journal, ev({ s: new Number(1) }), "input.payload", "input.payload.s:", "not a plain JSON value")
        yield* refused(journal, ev({ s: new Date(Number.NaN) }), "input.payload", "input.payload.s:", "invalid Date")
        yield* refused(journal, ev({ "odd key": [Number.NaN] }), "input.payload", `input.payload["odd key"][0]:`)
        yield* refused(journal, ev({}, { meta: { m: Number.NaN } }), "input.meta", "input.meta.m:", "NaN")
        yield* nothingConsumed(journal)
        // A Date is the one non-plain object the spec admits (check 2): stored as its ISO string.
        yield* journal.emitDurableUnfenced(ev({ at: new Date(0) }))
        expect((yield* rows("r"))[2]?.payload_json).toBe(`{"at":"1970-01-01T00:00:00.000Z"}`)
      }))

    test("accessors and proxies are refused without running caller code", (journal) =>
      Effect.gen(function*() {
        let calls = 0
        const getter = Object.defineProperty({}, "k", {
          get() {
            calls++
            return "v"
          },
          enumerable: true
        })
        yield* refused(journal, ev(getter), "input.payload", "input.payload.k:", "is an accessor property")
        const throwing = Object.defineProperty({}, "k", {
          get() {
            calls++
            throw new Error("caller-exception-text")
          },
          enumerable: true
        })
        yield* refused(journal, ev({ nested: throwing }), "input.payload", "input.payload.nested.k:", "accessor")
        for (const emit of [journal.emitDurableUnfenced, journal.emitLossy]) {
          const error = yield* Effect.flip(emit(ev({ nested: throwing })))
          expect(JSON.stringify(error)).not.toContain("caller-exception-text")
          expect(String(error.message)).not.toContain("caller-exception-text")
        }
        const trap = () => {
          calls++
          throw new Error("caller-exception-text")
        }
        const proxy = new Proxy({}, { ownKeys: trap, getOwnPropertyDescriptor: trap, get: trap, getPrototypeOf: trap })
        yield* refused(journal, ev({ p: proxy }), "input.payload", "input.payload.p:", "Proxy")
        yield* refused(journal, ev({}, { meta: getter }), "input.meta", "input.meta.k:", "accessor")
        expect(calls).toBe(0)
        yield* own("r", A)
        const error = yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 0, state: getter }, A))
        expect(error.code).toBe("invalid_event")
        expect(error.message).toContain("options.state.k:")
        expect(calls).toBe(0)
        yield* nothingConsumed(journal)
      }))

    test("a throwing redactor's text never reaches the error", (journal) =>
      Effect.gen(function*() {
        for (const emit of [journal.emitDurableUnfenced, journal.emitLossy]) {
          const error = yield* Effect.flip(emit(ev({ s: 1 })))
          expect(error.code).toBe("invalid_event")
          expect(error.field).toBe("input.payload")
          expect(JSON.stringify(error)).not.toContain("redactor-exception-text")
        }
      }), {
      redact: (value) => {
        if (typeof value === "object" && value !== null && "s" in value) throw new Error("redactor-exception-text")
        return value
      }
    })

    test("a sparse array is refused before any write, naming the hole", (journal) =>
      Effect.gen(function*() {
        // eslint-disable-next-line no-sparse-arrays
        yield* refused(journal, ev({ a: [1, , 3] }), "input.payload", "input.payload.a[1]:", "hole")
        yield* refused(journal, ev(new Array(3)), "input.payload", "input.payload[0]:", "hole")
        // eslint-disable-next-line no-sparse-arrays
        yield* refused(journal, ev({}, { meta: [, 1] }), "input.meta", "input.meta[0]:", "hole")
        yield* nothingConsumed(journal)
        yield* own("r", A)
        // eslint-disable-next-line no-sparse-arrays
        const error = yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 0, state: { a: [1, , 3] } }, A))
        expect(error.code).toBe("invalid_event")
        expect(error.message).toContain("options.state.a[1]:")
        expect(yield* count("flows_journal_checkpoints")).toBe(0)
      }))

    test("a Clock reading outside what the store holds is invalid_event on every channel, nothing queued or written", (journal) =>
      Effect.gen(function*() {
        yield* own("r", A)
        for (const reading of [-1, -0.5, Number.MAX_SAFE_INTEGER + 1]) {
          yield* TestClock.setTime(reading)
          const refusals = [
            yield* Effect.flip(journal.emitDurableUnfenced(ev({ ok: 1 }))),
            yield* Effect.flip(journal.emitDurable(ev({ ok: 1 }), A)),
            yield* Effect.flip(journal.emitLossy(ev({ ok: 1 }))),
            yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 0, state: {} }, A)),
            yield* Effect.flip(journal.compact({ runId: "r" }, A))
          ]
          for (const error of refusals) {
            expect(error.code, error.message).toBe("invalid_event")
            expect(error.field).toBe("clock")
            expect(error.message).toContain("0..9007199254740991")
            expect(error.message).not.toContain(String(reading))
          }
        }
        expect(yield* count("flows_journal_checkpoints")).toBe(0)
        yield* TestClock.setTime(0)
        yield* nothingConsumed(journal)
        // The admitted range is exactly what the columns hold: its top is stored and read back.
        yield* TestClock.setTime(Number.MAX_SAFE_INTEGER)
        yield* journal.emitLossy(ev({ ok: 2 }))
        yield* journal.flush
        const page = yield* journal.entries({ runId: "r", after: 1, limit: 10 })
        expect(page.entries.map((entry) => entry.emittedAtMs)).toEqual([Number.MAX_SAFE_INTEGER])
      }))

    test("checkpoint state must be plain JSON too", (journal) =>
      Effect.gen(function*() {
        yield* own("r", A)
        for (const state of [{ s: Number.NaN }, { s: undefined }, { s: new WithToJSON() }]) {
          const error = yield* Effect.flip(journal.checkpoint({ runId: "r", seq: 0, state }, A))
          expect(error.code).toBe("invalid_event")
          expect(error.field).toBe("options.state")
          expect(error.message).toContain("options.state.s:")
        }
        expect(yield* count("flows_journal_checkpoints")).toBe(0)
      }))
  })
