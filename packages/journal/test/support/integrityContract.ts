/**
 * Integrity of the journal's lossy writer, written once and run on SQLite and
 * PostgreSQL: a writer killed by a defect fails flushes with `sink_failed`
 * instead of hanging them (and the journal's close).
 */
import { DurableWriter } from "@baton/database/DurableWriter"
import { Journal } from "@baton/journal/Journal"
import * as TestJournal from "@baton/journal/TestJournal"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer } from "effect"
import { ev, rows } from "./owners.js"

type Database = Layer.Layer<SqlClient.SqlClient | DurableWriter, unknown>

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
        writer.write(Effect.suspend(() => dying.on ? Effect.dieMessage("injected writer defect") : body), options)
    })
    return Context.make(SqlClient.SqlClient, sql).pipe(Context.add(DurableWriter, wrapped))
  })).pipe(Layer.provide(database))

export const integrityContract = (name: string, database: () => Database, timeout?: number) =>
  describe(`Journal integrity: ${name}`, () => {
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
  })
