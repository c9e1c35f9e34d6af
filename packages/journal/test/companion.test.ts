import * as Companion from "@baton/journal/Companion"
import { Journal } from "@baton/journal/Journal"
import * as JournalEvent from "@baton/journal/JournalEvent"
import * as TestJournal from "@baton/journal/TestJournal"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect } from "effect"
import { count, rows } from "./support/owners.js"

const fact = (runId: string) => ({
  ...Companion.runStore,
  runId,
  eventType: "flows.consensus.claimed",
  payload: { owner: { hostId: "h", pid: 1, nonce: "n" }, grantedAtMs: 5 }
})

describe("Companion (check 32)", () => {
  it.effect("a rolled-back transaction leaves no fact; a committed one lands on the companion stream", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      const failed = yield* journal.transact(
        Companion.append(fact("r")).pipe(Effect.zipRight(Effect.fail("rollback" as const))),
        { key: "r" }
      ).pipe(Effect.flip)
      expect(failed).toBe("rollback")
      expect(yield* count("flows_journal_events")).toBe(0)
      yield* journal.transact(Companion.append(fact("r")), { key: "r" })
      const companion = JournalEvent.companionRunId("run-store", "r")
      expect(JournalEvent.isCompanionRunId(companion)).toBe(true)
      expect(yield* rows("r")).toEqual([])
      const stored = yield* rows(companion)
      expect(stored.map((row) => [row.source_id, row.event_type, JSON.parse(row.payload_json), row.meta_json])).toEqual([
        ["flows.run-store", "flows.consensus.claimed", { grantedAtMs: 5, owner: { hostId: "h", nonce: "n", pid: 1 }, runId: "r" }, `{"runId":"r"}`]
      ])
      const page = yield* Companion.entries("run-store", "r")
      expect(page.entries.map((entry) => entry.seq)).toEqual([0])
      expect((yield* journal.entries({ runId: "r", limit: 10 })).entries).toEqual([])
    }).pipe(Effect.provide(TestJournal.layer())))

  it.effect("transact with savepoint: false joins the enclosing write; a caught joined failure rolls it all back", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      // Committed with its enclosing write.
      yield* journal.transact(journal.transact(Companion.append(fact("r")), { key: "r", savepoint: false }), { key: "r" })
      const companion = JournalEvent.companionRunId("run-store", "r")
      expect((yield* rows(companion)).length).toBe(1)
      // Joined without a savepoint, a failure cannot be undone alone: catching it and
      // committing the enclosing write is refused, and nothing of it lands.
      const exit = yield* journal.transact(
        Effect.gen(function*() {
          yield* journal.transact(
            Companion.append(fact("r")).pipe(Effect.zipRight(Effect.fail("late" as const))),
            { key: "r", savepoint: false }
          ).pipe(Effect.ignore)
        }),
        { key: "r" }
      ).pipe(Effect.exit)
      expect(exit._tag).toBe("Failure")
      expect((yield* rows(companion)).length).toBe(1)
    }).pipe(Effect.provide(TestJournal.layer())))

  it.effect("a direct emit on a companion id keeps its savepoint: its caught failure leaves the enclosing write usable", () =>
    Effect.gen(function*() {
      const journal = yield* Journal
      const companion = JournalEvent.companionRunId("run-store", "r")
      const emit = (payload: unknown) =>
        journal.emitDurableUnfenced({ runId: companion, sourceId: "direct", sourceSeq: 0, eventType: "t", payload })
      yield* emit({ v: 1 })
      const caught = yield* journal.transact(
        Effect.gen(function*() {
          const error = yield* Effect.flip(emit({ v: 2 }))
          yield* Companion.append(fact("r"))
          return error.code
        }),
        { key: "r" }
      )
      expect(caught).toBe("idempotency_conflict")
      // The enclosing write committed: the direct event once, then the fact.
      expect((yield* rows(companion)).map((row) => [row.source_id, JSON.parse(row.payload_json)])).toEqual([
        ["direct", { v: 1 }],
        ["flows.run-store", { grantedAtMs: 5, owner: { hostId: "h", nonce: "n", pid: 1 }, runId: "r" }]
      ])
    }).pipe(Effect.provide(TestJournal.layer())))

  it.effect("a 1024-character run id still gives a valid companion id", () =>
    Effect.gen(function*() {
      const long = "x".repeat(1024)
      yield* Companion.append(fact(long))
      const page = yield* Companion.entries("run-store", long)
      expect(page.entries.length).toBe(1)
      expect(page.entries[0]!.runId.length).toBeLessThanOrEqual(1024)
    }).pipe(Effect.provide(TestJournal.layer())))

  it.effect("without a Journal in context it writes nothing", () =>
    Effect.gen(function*() {
      yield* Companion.append(fact("r")).pipe(Effect.mapInputContext((context: Context.Context<never>) => Context.omit(Journal)(context)))
      expect(yield* count("flows_journal_events")).toBe(0)
    }).pipe(Effect.provide(TestJournal.layer())))

  it.effect("a bad fact fails invalid_event and writes nothing", () =>
    Effect.gen(function*() {
      const badStream = yield* Effect.flip(Companion.append({ ...fact("r"), stream: "Bad Stream" }))
      expect(badStream.field).toBe("fact.stream")
      const badRun = yield* Effect.flip(Companion.append(fact("")))
      expect(badRun.field).toBe("fact.runId")
      expect(yield* count("flows_journal_events")).toBe(0)
    }).pipe(Effect.provide(TestJournal.layer())))
})
