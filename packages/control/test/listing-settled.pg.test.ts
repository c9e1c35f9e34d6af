/**
 * Run paging on PostgreSQL never passes a `row_seq` whose create is still open: creates take numbers from a
 * sequence (no shared row, so they do not wait on one another) and commit out of number order, so a page that
 * hands out a position waits for the creates in flight when it read the sequence. A raw connection holds the
 * lower number's create open while the store commits the higher one.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { loadPg } from "../../run-store/test/support/drivers.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import { pgDatabase, sqlRuntime } from "./fixtures/runtimeSupport.js"

const url = TestDatabase.postgresTestUrl("control listing settled numbers")

interface Client {
  readonly query: (text: string, values?: ReadonlyArray<unknown>) => Promise<{ readonly rows: Array<any> }>
}

/** A raw connection on the test's schema, closed with the scope. */
const connection = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const schema = (yield* sql<{ s: string }>`SELECT current_schema() AS s`)[0]!.s
  const pg = loadPg()
  return yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url!, options: `-c search_path=${schema}` })
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.end())
  ) as Effect.Effect<Client>
})

const query = (client: Client, text: string) => Effect.promise(() => client.query(text)).pipe(Effect.map((r) => r.rows))

/**
 * Opens a create of `held` (taking the next number) on a raw connection, commits `after` through the store
 * (the numbers above it), then runs `read` while `held` is open and commits `held` a moment later: a reader
 * that does not wait answers before that commit, without `held`.
 */
const heldCreate = <A>(read: Effect.Effect<A, unknown, ControlRuntime.ControlRuntime>, after: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const store = yield* RunStore.RunStore
    const t1 = yield* connection
    yield* query(t1, "BEGIN")
    yield* query(t1, `INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, state_json)
      VALUES (nextval('flows_run_row_seq'), 'held', 'pending', 0, '{"flowName":"E"}')`)
    for (const id of after) yield* store.create(id, JSON.stringify({ flowName: "E" }))
    const reader = yield* Effect.fork(read)
    yield* Effect.sleep("300 millis")
    yield* query(t1, "COMMIT")
    return yield* Fiber.join(reader)
  })

describe.skipIf(url === undefined)("run paging below the settled number (PostgreSQL)", () => {
  it.scopedLive("pageRunIds answers a through that no open create is below", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const rt = yield* ControlRuntime.ControlRuntime
      for (const id of ["r1", "r2"]) yield* store.create(id, JSON.stringify({ flowName: "E" }))
      const page = yield* heldCreate(rt.pageRunIds({ limit: 10 }), ["after"])
      expect(page.ids).toEqual(["r1", "r2", "held", "after"])
      expect(page.through).toBe(4)
    }).pipe(Effect.provide(sqlRuntime(pgDatabase(url!)))))

  it.scopedLive("a runs page that hands out a cursor never passes an open create", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const rt = yield* ControlRuntime.ControlRuntime
      yield* store.create("r1", JSON.stringify({ flowName: "E" }))
      // Without waiting, the first page would be r1 and a1 with a cursor past held.
      const first = yield* heldCreate(rt.queryRuns({ limit: 2, order: "oldest" }), ["a1", "a2"])
      expect(first.items.map((r) => r.runId)).toEqual(["r1", "held"])
      const rest = yield* rt.queryRuns({ limit: 2, order: "oldest", cursor: first.nextCursor! })
      expect(rest.items.map((r) => r.runId)).toEqual(["a1", "a2"])
    }).pipe(Effect.provide(sqlRuntime(pgDatabase(url!)))))

  it.scopedLive("a page read below a number known settled still never passes an open create above it", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const rt = yield* ControlRuntime.ControlRuntime
      for (const id of ["r1", "r2"]) yield* store.create(id, JSON.stringify({ flowName: "E" }))
      for (const id of ["x1", "x2", "x3", "x4"]) yield* store.create(id, JSON.stringify({ flowName: "F" }))
      // This page settles numbers 1 to 6, so the next one starts well below them, with no settle read first.
      const filters = { flowId: "E" }
      const first = yield* rt.queryRuns({ filters, limit: 1, order: "oldest" })
      expect(first.items.map((r) => r.runId)).toEqual(["r1"])
      // Its rows run past 6 (held is 7, a1 and a2 8 and 9): without waiting it would be r2 and a1.
      const second = yield* heldCreate(rt.queryRuns({ filters, limit: 2, order: "oldest", cursor: first.nextCursor! }), ["a1", "a2"])
      expect(second.items.map((r) => r.runId)).toEqual(["r2", "held"])
      const rest = yield* rt.queryRuns({ filters, limit: 2, order: "oldest", cursor: second.nextCursor! })
      expect(rest.items.map((r) => r.runId)).toEqual(["a1", "a2"])
    }).pipe(Effect.provide(sqlRuntime(pgDatabase(url!)))))
})
