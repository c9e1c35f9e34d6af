/**
 * The journal's fenced writes over this package's `SqlConsensus`, the run row as
 * the lease record: the journal's acceptance checks, and a fence lost to a steal
 * made through another connection.
 */
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as Consensus from "@baton/journal/Consensus"
import * as Journal from "@baton/journal/Journal"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import * as Dialect from "@baton/database/Dialect"
import * as JournalEvent from "@baton/journal/JournalEvent"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Context, Effect, Layer, type Scope } from "effect"
import { A, B, C, count, ev, own, rows, S } from "../../../journal/test/support/owners.js"
import { journalContract } from "../../../journal/test/support/journalContract.js"
import { captureSql } from "../support/capture.js"
import { contractRuns } from "../support/contractRuns.js"
import { type Database, migrated } from "../support/stack.js"

/** One host's journal stack: its own connection, the row strategy, the journal. */
export type Host = Context.Context<Journal.Journal | Consensus.Consensus | DurableWriter.DurableWriter | SqlClient.SqlClient>

/** The journal fenced through the row strategy over a database migrated with both sets. */
export const journalHost = (db: Database, options: SqlJournal.SqlJournalOptions = {}) =>
  Layer.provideMerge(SqlJournal.layerWith(options), Layer.provideMerge(SqlConsensus.layer, migrated(db)))

const on = <A, E>(host: Host, effect: Effect.Effect<A, E, any>) => Effect.provide(effect, host) as Effect.Effect<A, E>

export const journalFenceSuite = (
  name: string,
  makeDatabase: () => Database,
  twoHosts: Effect.Effect<readonly [Host, Host], unknown, Scope.Scope>,
  timeout: number
) => {
  journalContract(`${name}, over the run row`, (options) => journalHost(makeDatabase(), options), {
    timeout,
    prepare: contractRuns
  })

  it.effect("a fenced append over the run row is one statement behind the fence (SQLite adds the head's move)", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.Journal
      const sql = yield* SqlClient.SqlClient
      const pg = Dialect.isPostgres(sql)
      yield* contractRuns
      yield* own("r", A, 0)
      expect(yield* journal.emitDurable(ev("r", { n: 0 }), A)).toMatchObject({ _tag: "Accepted", seq: 0, sourceSeq: 0 })
      const { statements, value } = yield* captureSql(journal.emitDurable(ev("r", { n: 1 }), A))
      expect(value).toMatchObject({ _tag: "Accepted", seq: 1, sourceSeq: 1 })
      expect(statements.length).toBe(pg ? 1 : 2)
      // A lossy entry queued but not yet written holds its source_seq: the durable append takes the next one.
      expect(yield* journal.emitLossy(ev("r", { n: 2 }))).toMatchObject({ _tag: "Accepted", sourceSeq: 2 })
      expect(yield* journal.emitDurable(ev("r", { n: 3 }), A)).toMatchObject({ _tag: "Accepted", seq: 2, sourceSeq: 3 })
      yield* journal.flush
      const stored = yield* rows("r")
      expect(stored.map((row) => [row.seq, row.source_seq])).toEqual([[0, 0], [1, 1], [2, 3], [3, 2]])
      // Someone else's owner is refused by the fence and writes nothing.
      expect((yield* Effect.flip(journal.emitDurable(ev("r", { n: 4 }), B))).code).toBe("fence_lost")
      // A row already at the head's seq is a sequence conflict, named, and nothing is written.
      yield* sql`INSERT INTO flows_journal_events
        (run_id, seq, event_id, source_id, source_seq, emitted_at_ms, event_type, payload_json, meta_json)
        VALUES ('r', 4, ${JournalEvent.makeEventId("r", "other", 0)}, 'other', 0, 0, 'x', '{}', 'null')`
      const taken = yield* Effect.flip(journal.emitDurable(ev("r", { n: 5 }), A))
      expect(taken.code, taken.message).toBe("sequence_conflict")
      expect(taken.message).toContain("already has an entry at seq 4")
      expect((yield* rows("r")).length).toBe(5)
      const [head] = yield* sql<{ next_seq: unknown }>`SELECT next_seq FROM flows_journal_heads WHERE run_id = 'r'`
      expect(Number(head!.next_seq)).toBe(4)
    }).pipe(Effect.provide(journalHost(makeDatabase()))), timeout)

  it.live("a fence lost to another connection's steal blocks every fenced write of the old owner", () =>
    Effect.gen(function*() {
      const [one, two] = yield* twoHosts
      const j1 = Context.get(one, Journal.Journal)
      yield* on(one, contractRuns)
      yield* on(one, own("r", A, 0))
      expect(yield* j1.emitDurable(ev("r", { n: 0 }, { sourceSeq: 0 }), A)).toMatchObject({ seq: 0 })
      const thief = Context.get(two, Consensus.Consensus)
      const now = S + 1
      // Evidence naming someone other than the owner is refused; a fresh owner cannot be stolen.
      expect(yield* thief.steal("r", B, now, { expectedOwner: C, checkedAtMs: now, kind: "lease-expired" })).toEqual({
        _tag: "Rejected",
        reason: "evidence_invalid"
      })
      expect(yield* thief.steal("r", B, S, { expectedOwner: A, checkedAtMs: S, kind: "lease-expired" })).toEqual({
        _tag: "Rejected",
        reason: "owner_live"
      })
      const granted = yield* thief.steal("r", B, now, { expectedOwner: A, checkedAtMs: now, kind: "lease-expired" })
      expect(granted).toEqual({ _tag: "Granted", grantedAtMs: now })
      // Stolen but not activated: the old owner still holds the fence.
      expect(yield* j1.emitDurable(ev("r", { n: 1 }), A)).toMatchObject({ seq: 1 })
      expect(yield* thief.activate("r", B, now, now)).toEqual({ _tag: "Activated" })
      for (
        const attempt of [
          j1.emitDurable(ev("r", { n: 0 }, { sourceSeq: 0 }), A),
          j1.emitDurable(ev("r", { n: 2 }), A),
          j1.checkpoint({ runId: "r", seq: 0, state: {} }, A),
          j1.compact({ runId: "r" }, A)
        ] as const
      ) {
        expect((yield* Effect.flip(attempt as Effect.Effect<unknown, Journal.JournalError>)).code).toBe("fence_lost")
      }
      expect(yield* on(one, count("flows_journal_checkpoints"))).toBe(0)
      expect((yield* on(one, rows("r"))).length).toBe(2)
      expect(yield* Context.get(two, Journal.Journal).emitDurable(ev("r", { thief: true }), B)).toMatchObject({
        seq: 2,
        sourceSeq: 2
      })
    }).pipe(Effect.scoped), timeout * 4)
}
