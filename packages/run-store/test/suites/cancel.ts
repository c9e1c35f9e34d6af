/**
 * Checks 27–30: cancellation requests, acknowledgements and lineage.
 */
import * as Dialect from "@baton/database/Dialect"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { captureSql } from "../support/capture.js"
import { A, type MakeStack, pending } from "../support/stack.js"

export const cancelSuite = (makeStack: MakeStack) => {
  const run = <X, E>(effect: Effect.Effect<X, E, any>) => Effect.provide(effect, makeStack())
  const owned = (id: string, options?: RunStore.CreateOptions) =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create(id, "{}", options)
      expect(yield* store.claimAndOwn(id, pending, A, 0)).toEqual({ _tag: "Activated" })
      return store
    })
  const cancelColumn = (id: string) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.map(
        sql<{ readonly c: number | null }>`SELECT cancel_requested_at_ms AS c FROM flows_runs WHERE run_id = ${id}`,
        (rows) => rows[0]?.c ?? null
      ))

  it.effect("27: requestCancel: first writer wins, settled runs record nothing", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      expect(yield* store.requestCancel("r", 500)).toEqual({ _tag: "CancelRequested", requestedAtMs: 500 })
      expect(yield* store.requestCancel("r", 900)).toEqual({ _tag: "AlreadyRequested", requestedAtMs: 500 })
      expect(yield* store.requestCancel("missing", 1)).toEqual({ _tag: "NotFound" })

      yield* store.create("race", "{}")
      const outcomes = yield* Effect.all(
        [store.requestCancel("race", 1), store.requestCancel("race", 2), store.requestCancel("race", 3)],
        { concurrency: 3 }
      )
      const winners = outcomes.filter((o) => o._tag === "CancelRequested")
      expect(winners.length).toBe(1)
      const time = (winners[0] as { requestedAtMs: number }).requestedAtMs
      expect(outcomes.filter((o) => o._tag === "AlreadyRequested").map((o) => (o as any).requestedAtMs)).toEqual([
        time,
        time
      ])

      yield* owned("done")
      yield* store.transitionOwned("done", A, "completed")
      expect(yield* store.requestCancel("done", 1)).toEqual({ _tag: "Terminal", status: "completed" })
      expect(yield* store.requestCancel("done", 2)).toEqual({ _tag: "Terminal", status: "completed" })
      expect(yield* cancelColumn("done")).toBeNull()

      yield* owned("cancelled")
      yield* store.requestCancel("cancelled", 7)
      yield* store.transitionOwned("cancelled", A, "cancelled")
      expect(yield* store.requestCancel("cancelled", 8)).toEqual({ _tag: "Terminal", status: "cancelled" })
      expect(yield* cancelColumn("cancelled")).toBe(7)
    })))

  it.effect("27: an update silently ignored by a trigger is a write-invariant failure", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      yield* store.create("r", "{}")
      yield* Dialect.trigger(sql, { name: "ignore_updates", table: "flows_runs", event: "BEFORE UPDATE", ignore: true })
      const error = yield* Effect.flip(store.requestCancel("r", 1))
      expect(error.code).toBe("persistence_failed")
      expect(error.cause).toEqual({ runId: "r", stage: "write-invariant" })
    })))

  it.effect("28: acknowledgeCancel is row-fenced and keeps the first record", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      yield* store.create("p", "{}")
      expect(yield* store.acknowledgeCancel("p", A, 1)).toBe(false)
      yield* owned("r")
      expect(yield* store.acknowledgeCancel("r", A, 1)).toBe(false)
      yield* store.requestCancel("r", 2)
      expect(yield* store.acknowledgeCancel("r", { ...A, nonce: "stale" }, 3)).toBe(false)
      expect(yield* store.acknowledgeCancel("r", A, 4)).toBe(true)
      expect(yield* store.acknowledgeCancel("r", A, 5)).toBe(true)
      const ack = yield* sql<{ readonly j: string }>`SELECT cancel_acknowledgement_json AS j FROM flows_runs
        WHERE run_id = 'r'`
      expect(JSON.parse(ack[0]!.j)).toEqual({ observedAtMs: 4, owner: A })
      expect(ack[0]!.j).toBe(JSON.stringify({ observedAtMs: 4, owner: { hostId: "host-a", pid: 101, nonce: "a" } }))
      yield* store.transitionOwned("r", A, "cancelled")
      expect(yield* store.acknowledgeCancel("r", A, 6)).toBe(false)
      expect(yield* RunStore.makeNoop().acknowledgeCancel("r", A, 6)).toBe(false)
      expect((yield* Effect.flip(store.acknowledgeCancel("", A, 6))).code).toBe("invalid_run")
    })))

  it.effect("29: lineage membership and the latest round", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("root", "{}")
      yield* store.create("second", "{}", { parentRunId: "root", lineageId: "root", roundOrdinal: 1 })
      yield* store.create("third", "{}", { parentRunId: "second", lineageId: "root", roundOrdinal: 2 })
      yield* store.create("fork", "{}", { parentRunId: "root", lineageId: "fork", roundOrdinal: 0 })
      yield* store.create("other", "{}")
      for (const id of ["root", "second", "third"]) {
        expect((yield* store.lineage(id)).map((r) => r.runId)).toEqual(["root", "second", "third"])
        expect((yield* store.latestRound(id)).runId).toBe("third")
      }
      expect((yield* store.lineage("fork")).map((r) => r.runId)).toEqual(["fork"])
      expect(yield* store.lineage("missing")).toEqual([])
      expect((yield* Effect.flip(store.latestRound("missing"))).code).toBe("not_found_row")
      expect((yield* store.latestRound("other")).runId).toBe("other")

      yield* store.create("shared", "{}", { lineageId: "indep", roundOrdinal: 0 })
      yield* store.create("target", "{}", { lineageId: "shared", roundOrdinal: 0 })
      expect((yield* store.lineage("target")).map((r) => r.runId)).toEqual(["target"])
      expect((yield* store.lineage("shared")).map((r) => r.runId)).toEqual(["shared"])
      expect((yield* store.requestCancelLineage("target", 5))._tag).toBe("CancelRequested")
      expect((yield* store.get("shared")).cancelRequestedAtMs).toBeNull()
    })))

  it.effect("30: requestCancelLineage requests every live round in one transaction", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      yield* owned("root")
      yield* store.transitionOwned("root", A, "completed")
      yield* store.create("next", "{}", { parentRunId: "root", lineageId: "root", roundOrdinal: 1 })
      expect(yield* store.requestCancelLineage("root", 100)).toEqual({ _tag: "CancelRequested", requestedAtMs: 100 })
      expect((yield* store.get("root")).cancelRequestedAtMs).toBeNull()
      expect((yield* store.get("next")).cancelRequestedAtMs).toBe(100)
      expect(yield* store.requestCancelLineage("next", 200)).toEqual({ _tag: "AlreadyRequested", requestedAtMs: 100 })

      yield* owned("s0")
      yield* store.transitionOwned("s0", A, "completed")
      yield* owned("s1", { lineageId: "s0", roundOrdinal: 1 })
      yield* store.transitionOwned("s1", A, "failed")
      expect(yield* store.requestCancelLineage("s0", 1)).toEqual({ _tag: "Terminal", status: "failed" })

      yield* store.create("e0", "{}")
      yield* store.requestCancel("e0", 50)
      yield* owned("e1", { lineageId: "e0", roundOrdinal: 1 })
      yield* store.transitionOwned("e1", A, "cancelled")
      expect(yield* store.requestCancelLineage("e1", 60)).toEqual({ _tag: "AlreadyRequested", requestedAtMs: 50 })

      yield* store.create("l0", "{}")
      yield* store.create("l1", "{}", { lineageId: "l0", roundOrdinal: 1 })
      yield* Dialect.trigger(sql, {
        name: "abort_round_one",
        table: "flows_runs",
        event: "BEFORE UPDATE",
        when: "NEW.run_id = 'l1'",
        reject: "round one refuses"
      })
      expect((yield* Effect.flip(store.requestCancelLineage("l0", 70))).code).toBe("constraint")
      expect((yield* store.get("l0")).cancelRequestedAtMs).toBeNull()
      expect((yield* store.get("l1")).cancelRequestedAtMs).toBeNull()
      yield* Dialect.dropTrigger(sql, "abort_round_one", "flows_runs")
      expect(yield* store.requestCancelLineage("l0", 70)).toEqual({ _tag: "CancelRequested", requestedAtMs: 70 })
      expect((yield* store.get("l1")).cancelRequestedAtMs).toBe(70)
    })))

  it.effect("30: the lineage request's cost is independent of settled history and state size", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      const history = (root: string, rounds: number) =>
        Effect.gen(function*() {
          yield* sql.withTransaction(Effect.forEach(Array.from({ length: rounds }, (_, n) => n), (n) =>
            sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, finished_at_ms, state_json,
              lineage_id, round_ordinal) VALUES (${100_000 + rounds * 10 + n + (root === "big" ? 500_000 : 0)},
              ${n === 0 ? root : `${root}-${n}`}, 'completed', 0, 0, '{}', ${n === 0 ? null : root}, ${n === 0 ? null : n})`))
          yield* store.create(`${root}-live`, '{"big":"state"}', { lineageId: root, roundOrdinal: rounds })
        })
      yield* history("small", 2)
      yield* history("big", 1000)
      const small = yield* captureSql(store.requestCancelLineage("small", 1))
      const big = yield* captureSql(store.requestCancelLineage("big", 1))
      expect(small.value._tag).toBe("CancelRequested")
      expect(big.value._tag).toBe("CancelRequested")
      expect(big.statements).toEqual(small.statements)
      const writes = big.statements.filter((s) => /^\s*UPDATE/i.test(s))
      expect(writes.length).toBe(1)
      for (const statement of [...big.statements]) expect(statement).not.toContain("state_json")
      if (!Dialect.isPostgres(sql)) {
        // SQLite: exactly one statement on the success path (the writer's BEGIN/COMMIT aside).
        expect(big.statements.filter((s) => !/^(BEGIN|COMMIT|SAVEPOINT|RELEASE)/i.test(s.trim())).length).toBe(1)
      }
    })))
}
