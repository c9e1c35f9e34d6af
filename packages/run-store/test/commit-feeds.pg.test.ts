/**
 * Commit feeds on PostgreSQL with no shared row: writers of different runs never wait on one another,
 * and the revision feed never passes a lower revision whose transaction commits later. Raw driver
 * connections hold transactions open exactly where the tests need them.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import * as RunChanges from "@baton/run-store/RunChanges"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { loadPg } from "./support/drivers.js"
import { stack } from "./support/stack.js"

const url = TestDatabase.postgresTestUrl("run-store commit feeds")

interface Client {
  readonly query: (text: string, values?: ReadonlyArray<unknown>) => Promise<{ readonly rows: Array<any> }>
  readonly end: () => Promise<void>
}

/** A raw connection on the test's schema, closed with the scope. */
const connection = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const schema = (yield* sql<{ s: string }>`SELECT current_schema() AS s`)[0]!.s
  const pg = loadPg()
  return yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url!, options: `-c search_path=${schema}` }) as Client & {
        connect: () => Promise<void>
      }
      await client.connect()
      return client as Client
    }),
    (client) => Effect.promise(() => client.end())
  )
})

const query = (client: Client, text: string, values?: ReadonlyArray<unknown>) =>
  Effect.promise(() => client.query(text, values)).pipe(Effect.map((r) => r.rows))

/** Like `query`, but a failure (a lock timeout) is a value to assert on, not a defect. */
const attempt = (client: Client, text: string, values?: ReadonlyArray<unknown>) =>
  Effect.tryPromise({ try: () => client.query(text, values), catch: (e) => e as { readonly code?: string } })

/** Waits until every transaction open when called has ended anywhere on the server. */
const settled = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [mark] = yield* sql<{ x: string }>`SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x`
  for (;;) {
    const [now] = yield* sql<{ passed: boolean }>`SELECT pg_snapshot_xmin(pg_current_snapshot()) >= ${mark!.x}::xid8 AS passed`
    if (now!.passed) return
    yield* Effect.sleep("20 millis")
  }
})

/** The feed from `after` to its current end. */
const drain = (after: RunChanges.Cursor) =>
  Effect.gen(function*() {
    const changes: Array<RunChanges.Change> = []
    let cursor = after
    for (;;) {
      const page = yield* RunChanges.page(cursor, 2)
      changes.push(...page.changes)
      if (page.changes.length === 0) return { changes, next: cursor }
      cursor = page.next
    }
  })

const touch = (runId: string, mark: number) =>
  [`UPDATE flows_runs SET state_json = $1 WHERE run_id = $2`, [JSON.stringify({ mark }), runId]] as const

/** The statement `RunStore.create` sends on PostgreSQL, for a raw connection. */
const create = (runId: string) =>
  `INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, state_json)
    VALUES (nextval('flows_run_row_seq'), '${runId}', 'pending', 0, '{}')`

describe.skipIf(url === undefined)("commit feeds without a shared row (PostgreSQL)", () => {
  const layer = () => stack(TestDatabase.layerPostgres(url!))

  it.live("a reader never passes a lower revision whose transaction commits later", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      for (const id of ["a", "b"]) yield* store.create(id, "{}")
      yield* settled
      const before = (yield* drain(RunChanges.start)).next
      const t1 = yield* connection
      const t2 = yield* connection

      // T1 takes revision n and stays open; T2 takes n + 1 and commits.
      yield* query(t1, "BEGIN")
      yield* query(t1, ...touch("a", 1))
      const [n] = yield* query(t1, "SELECT revision FROM flows_run_changes WHERE run_id = 'a'")
      yield* query(t2, "BEGIN")
      yield* query(t2, ...touch("b", 1))
      const [n1] = yield* query(t2, "SELECT revision FROM flows_run_changes WHERE run_id = 'b'")
      yield* query(t2, "COMMIT")
      expect(Number(n1.revision)).toBeGreaterThan(Number(n.revision))

      // b is committed, but a lower revision is still open below it: the reader shows neither.
      expect(yield* drain(before)).toEqual({ changes: [], next: before })

      yield* query(t1, "COMMIT")
      yield* settled
      const after = yield* drain(before)
      expect(after.changes.map((c) => [c.runId, c.revision])).toEqual([["a", Number(n.revision)], ["b", Number(n1.revision)]])
      expect((yield* drain(after.next)).changes).toEqual([])
    }).pipe(Effect.provide(layer()), Effect.scoped))

  it.live("eight writers on different runs do not wait on one another", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const runs = Array.from({ length: 8 }, (_, i) => `w${i}`)
      for (const id of [...runs, "x"]) yield* store.create(id, "{}")
      const clients = yield* Effect.all(runs.map(() => connection))

      // T1 changes run w0 (a revision-advancing update), creates a run the way RunStore.create does
      // (taking a row_seq), and holds its transaction open.
      yield* query(clients[0]!, "BEGIN")
      yield* query(clients[0]!, ...touch("w0", 1))
      yield* query(clients[0]!, create("held"))
      // The seven others each change their own run while T1 is open; a wait on any row T1 holds
      // would end in the lock timeout instead of a commit.
      const outcomes = yield* Effect.all(
        runs.slice(1).map((id, k) =>
          Effect.gen(function*() {
            const c = clients[k + 1]!
            yield* query(c, "BEGIN")
            yield* query(c, "SET LOCAL lock_timeout = '2s'")
            const update = yield* Effect.either(attempt(c, ...touch(id, 1)))
            const settle = yield* Effect.either(attempt(c, "UPDATE flows_runs SET status = 'cancelled', finished_at_ms = 1 WHERE run_id = $1", [id]))
            const created = yield* Effect.either(attempt(c, create(`${id}-new`)))
            yield* query(c, "COMMIT")
            return [update._tag, settle._tag, created._tag]
          })
        ),
        { concurrency: "unbounded" }
      )
      expect(outcomes).toEqual(runs.slice(1).map(() => ["Right", "Right", "Right"]))
      // The store's own write path (its intention locks and row lock) neither, with T1 still open.
      expect((yield* store.requestCancel("x", 5))._tag).toBe("CancelRequested")
      yield* store.create("y", "{}")
      yield* query(clients[0]!, "COMMIT")
      for (const id of runs.slice(1)) expect((yield* store.get(id)).status).toBe("cancelled")
    }).pipe(Effect.provide(layer()), Effect.scoped))
})
