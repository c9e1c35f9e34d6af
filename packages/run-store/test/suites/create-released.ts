/**
 * `createReleased`: many runs created released in their queue in one write, the row a create, a
 * claim and an at-once release leave; chunked statements; all or none.
 */
import * as Companion from "@baton/journal/Companion"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { sqlLog } from "../support/capture.js"
import { A, B, type MakeStack, ownedRun, pending } from "../support/stack.js"

const released: RunStore.RunSnapshot = { status: "suspended", owner: null, heartbeatAtMs: null }

const inserts = (statements: ReadonlyArray<string>) =>
  statements.filter((text) => /^\s*INSERT INTO flows_runs\b/.test(text)).length

const runCount = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM flows_runs`, ([row]) => Number(row!.n)))

export const createReleasedSuite = (makeStack: MakeStack) => {
  const run = <X, E>(effect: Effect.Effect<X, E, any>) => Effect.provide(effect, makeStack())

  it.effect("the rows equal what create, claimAndOwn and a transition to suspended leave, without ownership facts", () =>
    run(Effect.gen(function*() {
      const store = yield* ownedRun("old", A, "{}")
      yield* store.transitionOwned("old", A, "suspended", `{"s":1}`)
      yield* store.createReleased([{ runId: "new", stateJson: `{"s":1}`, options: { parentRunId: "old" } }])
      const before = yield* store.get("old")
      const after = yield* store.get("new")
      expect({ ...after, runId: "x", createdAtMs: 0, startedAtMs: 0, parentRunId: null }).toEqual(
        { ...before, runId: "x", createdAtMs: 0, startedAtMs: 0, parentRunId: null }
      )
      expect(after.startedAtMs).toBe(after.createdAtMs)
      expect(after.parentRunId).toBe("old")
      const facts = yield* Companion.entries(Companion.runStore.stream, "new")
      expect(facts.entries).toEqual([])
    })))

  it.effect("a released run is claimed by any host as an unowned one: claimed and activated are its first facts", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.createReleased([{ runId: "q1", stateJson: "{}" }, { runId: "q2", stateJson: "{}" }])
      expect(yield* store.claimAndOwn("q2", released, B, 1_000)).toEqual({ _tag: "Activated" })
      expect(yield* store.transitionOwned("q2", B, "completed")).toEqual({ _tag: "Transitioned" })
      const facts = yield* Companion.entries(Companion.runStore.stream, "q2")
      expect(facts.entries.map((e) => e.eventType)).toEqual([
        "flows.consensus.claimed",
        "flows.consensus.activated",
        "flows.consensus.released"
      ])
      expect((yield* store.get("q2")).status).toBe("completed")
      // A pending snapshot no longer matches: the run is released, not pending.
      expect((yield* store.claimAndOwn("q1", pending, A, 1_000))._tag).toBe("SnapshotChanged")
    })))

  it.effect("2,500 runs are written in chunks of 1,000, one INSERT each, every run numbered and changed once", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      yield* store.create("first", "{}")
      const runs = Array.from({ length: 2_500 }, (_, i) => ({ runId: `bulk-${i}`, stateJson: `{"i":${i}}` }))
      const log = sqlLog()
      yield* log.within(store.createReleased(runs))
      expect(RunStore.createReleasedChunkSize).toBe(1_000)
      expect(inserts(log.statements)).toBe(3)
      expect(log.statements.length).toBeLessThanOrEqual(6)
      const rows = yield* sql<{ run_id: string; row_seq: number | string; status: string; state_json: string }>`SELECT
        run_id, row_seq, status, state_json FROM flows_runs WHERE run_id LIKE 'bulk-%'`
      expect(rows.length).toBe(2_500)
      expect(rows.every((r) => r.status === "suspended")).toBe(true)
      expect(new Set(rows.map((r) => Number(r.row_seq))).size).toBe(2_500)
      const byId = new Map(rows.map((r) => [r.run_id, r]))
      expect(byId.get("bulk-2499")?.state_json).toBe(`{"i":2499}`)
      const [changes] = yield* sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM flows_run_changes
        WHERE run_id LIKE 'bulk-%'`
      expect(Number(changes!.n)).toBe(2_500)
    })))

  it.effect("an id that already has a row fails constraint naming it, and nothing of the batch is written", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("taken", "{}")
      const before = yield* runCount
      const runs = [...Array.from({ length: 1_200 }, (_, i) => ({ runId: `b-${i}`, stateJson: "{}" })), { runId: "taken", stateJson: "{}" }]
      const error = yield* Effect.flip(store.createReleased(runs))
      expect(error.code).toBe("constraint")
      expect(error.cause).toMatchObject({ runId: "taken" })
      expect(yield* runCount).toBe(before)
    })))

  it.effect("bad input fails invalid_run naming runs[i] and the field, and writes nothing; an empty list sends nothing", () =>
    run(Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const before = yield* runCount
      const badState = yield* Effect.flip(store.createReleased([
        { runId: "ok", stateJson: "{}" },
        { runId: "bad", stateJson: "{SECRET" }
      ]))
      expect(badState.code).toBe("invalid_run")
      expect(badState.cause).toMatchObject({ field: "runs[1].stateJson" })
      expect(badState.message).not.toContain("SECRET")
      const repeated = yield* Effect.flip(store.createReleased([{ runId: "x", stateJson: "{}" }, { runId: "x", stateJson: "{}" }]))
      expect(repeated.cause).toMatchObject({ field: "runs[1].runId" })
      const selfParent = yield* Effect.flip(store.createReleased([{ runId: "y", stateJson: "{}", options: { parentRunId: "y" } }]))
      expect(selfParent.cause).toMatchObject({ field: "runs[0].options.parentRunId" })
      const notArray = yield* Effect.flip(store.createReleased("nope" as never))
      expect(notArray.cause).toMatchObject({ field: "runs" })
      expect(yield* runCount).toBe(before)
      const log = sqlLog()
      yield* log.within(store.createReleased([]))
      expect(log.statements).toEqual([])
    })))
}
