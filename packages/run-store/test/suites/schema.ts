/**
 * Checks 31–32 (and 44's revision part): migrations, row_seq and execution revisions.
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as Migrations from "@baton/run-store/Migrations"
import * as RunChanges from "@baton/run-store/RunChanges"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import { A, type Database, pending } from "../support/stack.js"

/** Deletes a run through a raw connection of another process. */
export type RawDelete = (sql: SqlClient.SqlClient, runId: string) => Effect.Effect<void, unknown>

const triggerColumns = (sql: SqlClient.SqlClient) =>
  Dialect.isPostgres(sql)
    ? Effect.map(
      sql<{ readonly c: string }>`SELECT event_object_column AS c FROM information_schema.triggered_update_columns
        WHERE trigger_schema = current_schema() AND trigger_name = 'flows_runs_revision_update'`,
      (rows) => rows.map((r) => r.c)
    )
    : Effect.map(
      sql<{ readonly s: string }>`SELECT sql AS s FROM sqlite_master WHERE type = 'trigger'
        AND name = 'flows_runs_revision_update'`,
      (rows) => /UPDATE OF (.*?) ON/s.exec(rows[0]!.s)![1]!.split(",").map((c) => c.trim())
    )

const indexes = (sql: SqlClient.SqlClient) =>
  Dialect.isPostgres(sql)
    ? Effect.map(
      sql<{ readonly n: string }>`SELECT indexname AS n FROM pg_indexes WHERE schemaname = current_schema()
        AND tablename = 'flows_runs'`,
      (rows) => rows.map((r) => r.n)
    )
    : Effect.map(
      sql<{ readonly n: string }>`SELECT name AS n FROM sqlite_master WHERE type = 'index' AND tbl_name = 'flows_runs'`,
      (rows) => rows.map((r) => r.n)
    )

const changes = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ run_id: string; revision: number; deleted: number }>`SELECT run_id, revision, deleted
      FROM flows_run_changes ORDER BY run_id`,
    (rows) => Object.fromEntries(rows.map((r) => [r.run_id, [Number(r.revision), Number(r.deleted)]]))
  )

const source = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ source: string }>`SELECT source FROM flows_run_source`,
    (rows) => rows[0]?.source
  )

/** The newest revision handed out (tombstones stay, so it never goes down). */
const head = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ h: number | null }>`SELECT MAX(revision) AS h FROM flows_run_changes`, (rows) => Number(rows[0]?.h ?? 0))

/**
 * On PostgreSQL, waits until every transaction that was open when called has ended anywhere on the
 * server (the feed holds back changes above the oldest open one, and other suites share the server).
 */
const settled = (sql: SqlClient.SqlClient) =>
  Dialect.isPostgres(sql)
    ? Effect.gen(function*() {
      const [mark] = yield* sql<{ x: string }>`SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x`
      for (;;) {
        const [now] = yield* sql<{ passed: boolean }>`SELECT pg_snapshot_xmin(pg_current_snapshot()) >= ${mark!.x}::xid8 AS passed`
        if (now!.passed) return
        // Real time: the suite runs under TestClock.
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      }
    })
    : Effect.void

const storeOn = Layer.provide(RunStore.layerWith, SqlConsensus.layer)

export const schemaSuite = (makeDatabase: () => Database, rawDelete: RawDelete) => {
  it.effect("31: migrations, tables, CHECKs, trigger columns and row_seq allocation", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const applied = yield* Migrations.run
      expect(applied).toEqual([
        { id: 1001, namespace: "run-store", name: "initial" },
        { id: 1002, namespace: "run-store", name: "lineage" },
        { id: 1003, namespace: "run-store", name: "execution_revisions" },
        { id: 1004, namespace: "run-store", name: "waiting_request" },
        { id: 1005, namespace: "run-store", name: "row_leases" },
        { id: 1006, namespace: "run-store", name: "commit_feeds" },
        { id: 1007, namespace: "run-store", name: "drop_consensus_leases" }
      ])
      expect(yield* Migrations.run).toEqual([])
      const tables = yield* Dialect.tables(sql)
      for (const t of ["flows_runs", "flows_attempts", "flows_run_counter", "flows_run_source", "flows_run_changes"]) {
        expect(tables).toContain(t)
      }
      // The journal's set created its old lease table first; the run row is the only lease record left.
      expect(tables).not.toContain("flows_consensus_leases")
      const idx = yield* indexes(sql)
      for (
        const i of [
          "flows_runs_parent_run_id_idx",
          "flows_runs_cancel_requested_idx",
          "flows_runs_waiting_reason_wake_at_idx",
          "flows_runs_lineage_idx"
        ]
      ) expect(idx).toContain(i)
      const half = yield* Effect.either(
        sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, owner_host_id, owner_pid, heartbeat_at_ms,
          state_json) VALUES (50, 'half', 'running', 0, 'h', 1, 0, '{}')`
      )
      expect(Either.isLeft(half) && DurableWriter.codeOf(half.left)).toBe("constraint")
      yield* sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, owner_host_id, owner_pid, owner_nonce,
        heartbeat_at_ms, state_json) VALUES (51, 'whole', 'running', 0, 'h', 1, 'n', 0, '{}')`
      const columns = (yield* Dialect.columns(sql, "flows_runs")).filter((c) => c !== "heartbeat_at_ms")
      expect([...(yield* triggerColumns(sql))].sort()).toEqual([...columns].sort())

      const store = yield* RunStore.RunStore
      const writer = yield* DurableWriter.DurableWriter
      const seqOf = (id: string) =>
        Effect.map(sql<{ s: number }>`SELECT row_seq AS s FROM flows_runs WHERE run_id = ${id}`, (r) => Number(r[0]!.s))
      for (const id of ["s1", "s2", "s3"]) yield* store.create(id, "{}")
      // PostgreSQL numbers from its sequence (raw rows do not move it); SQLite one above the highest row.
      const pg = Dialect.isPostgres(sql)
      const first = pg ? 1 : 52
      expect([yield* seqOf("s1"), yield* seqOf("s2"), yield* seqOf("s3")]).toEqual([first, first + 1, first + 2])
      const rolledBack = yield* Effect.either(
        writer.write(Effect.zipRight(store.create("gone", "{}"), Effect.fail("rollback" as const)), { key: "gone" })
      )
      expect(Either.isLeft(rolledBack)).toBe(true)
      yield* store.create("s4", "{}")
      // A sequence never gives a number back (no shared row to roll back); SQLite reuses the rolled-back one.
      expect(yield* seqOf("s4")).toBe(first + (pg ? 4 : 3))
      // A deleted run's number is never handed out again.
      yield* sql`DELETE FROM flows_runs WHERE run_id = 's4'`
      yield* store.create("s5", "{}")
      expect(yield* seqOf("s5")).toBe(first + (pg ? 5 : 4))
      const renumber = yield* Effect.either(sql`UPDATE flows_runs SET row_seq = 99 WHERE run_id = 's1'`)
      expect(Either.isLeft(renumber) && DurableWriter.codeOf(renumber.left)).toBe("constraint")
    }).pipe(
      Effect.provide(Layer.provideMerge(storeOn, Layer.provideMerge(JournalMigrations.layer, makeDatabase())))
    ))

  it.effect("32: revisions are backfilled, advanced by every change but heartbeats, and bounded", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const upTo0002: DatabaseMigrations.MigrationSet = {
        ...Migrations.set,
        migrations: Object.fromEntries(
          Object.entries(Migrations.set.migrations).filter(([k]) => k < "0003")
        )
      }
      yield* DatabaseMigrations.run([JournalMigrations.set, upTo0002])
      yield* sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, state_json)
        VALUES (1, 'a', 'pending', 1, '{}'), (2, 'b', 'pending', 2, '{}')`
      yield* sql`UPDATE flows_run_counter SET last_row_seq = 2`
      const upgraded = yield* DatabaseMigrations.run([JournalMigrations.set, Migrations.set])
      expect(upgraded.map((m) => m.id)).toEqual([1003, 1004, 1005, 1006, 1007])
      expect(yield* changes(sql)).toEqual({ a: [1, 0], b: [2, 0] })
      const first = (yield* source(sql))!
      expect(yield* head(sql)).toBe(2)
      expect(first).toMatch(/^[0-9a-f]{32}$/)

      const { store } = yield* Effect.map(RunStore.RunStore, (store) => ({ store }))
      expect(yield* store.claimAndOwn("a", pending, A, 0)).toEqual({ _tag: "Activated" })
      expect(yield* head(sql)).toBe(3)
      yield* store.heartbeat("a", A, 5)
      expect(yield* head(sql)).toBe(3)
      yield* store.requestCancel("a", 1)
      expect(yield* store.acknowledgeCancel("a", A, 2)).toBe(true)
      expect(yield* store.acknowledgeCancel("a", A, 3)).toBe(true)
      expect(yield* store.transitionOwned("a", A, "cancelled")).toEqual({ _tag: "Transitioned" })
      const rename = yield* Effect.either(sql`UPDATE flows_runs SET run_id = 'b2' WHERE run_id = 'b'`)
      expect(Either.isLeft(rename) && DurableWriter.codeOf(rename.left)).toBe("constraint")
      expect(yield* head(sql)).toBe(7)
      yield* rawDelete(sql, "a")
      expect(yield* source(sql)).toEqual(first)
      expect(yield* head(sql)).toBe(8)
      expect(yield* changes(sql)).toEqual({ a: [8, 1], b: [2, 0] })
      yield* settled(sql)
      const feed = yield* RunChanges.page(RunChanges.start, 10)
      expect(feed.changes.map((c) => [c.runId, c.revision, c.deleted])).toEqual([["b", 2, false], ["a", 8, true]])
      expect(yield* RunChanges.page(feed.next, 10)).toEqual({ changes: [], next: feed.next })

      // The next revision would pass 2^53 - 1: the sequence (PostgreSQL) or the column CHECK (SQLite) refuses it.
      yield* Dialect.isPostgres(sql)
        ? sql`SELECT setval('flows_run_revision', 9007199254740991)`
        : sql`UPDATE flows_run_changes SET revision = 9007199254740991 WHERE run_id = 'a'`
      const overflow = yield* Effect.flip(store.create("c", "{}"))
      expect(overflow.code).toBe("constraint")
      expect(yield* sql`SELECT run_id FROM flows_runs WHERE run_id = 'c'`).toEqual([])
      yield* sql`DELETE FROM flows_run_source`
      expect((yield* Effect.flip(store.create("d", "{}"))).code).toBe("constraint")
      for (const statement of [sql`UPDATE flows_runs SET status = 'suspended' WHERE run_id = 'b'`, sql`DELETE FROM flows_runs WHERE run_id = 'b'`]) {
        const refused = yield* Effect.either(statement)
        expect(Either.isLeft(refused) && DurableWriter.codeOf(refused.left)).toBe("constraint")
      }
      expect((yield* store.get("b")).status).toBe("pending")
    }).pipe(Effect.provide(Layer.provideMerge(storeOn, makeDatabase()))))

  it.effect("0005 moves live owners' generations from flows_consensus_leases onto the row, changing no revision", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const upTo0004: DatabaseMigrations.MigrationSet = {
        ...Migrations.set,
        migrations: Object.fromEntries(Object.entries(Migrations.set.migrations).filter(([k]) => k < "0005"))
      }
      yield* DatabaseMigrations.run([JournalMigrations.set, upTo0004])
      yield* sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms, owner_host_id, owner_pid,
        owner_nonce, heartbeat_at_ms, state_json) VALUES
        (1, 'leased', 'running', 0, 3, ${A.hostId}, ${A.pid}, ${A.nonce}, 9, '{}'),
        (2, 'unleased', 'running', 0, 4, ${A.hostId}, ${A.pid}, ${A.nonce}, 9, '{}')`
      yield* sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, state_json)
        VALUES (3, 'free', 'pending', 0, '{}')`
      yield* sql`UPDATE flows_run_counter SET last_row_seq = 3`
      yield* sql`INSERT INTO flows_consensus_leases (run_id, owner_host_id, owner_pid, owner_nonce, granted_at_ms,
        heartbeat_at_ms) VALUES ('leased', ${A.hostId}, ${A.pid}, ${A.nonce}, 7, 9)`
      const revision = yield* head(sql)
      expect((yield* DatabaseMigrations.run([JournalMigrations.set, Migrations.set])).map((m) => m.id)).toEqual([
        1005,
        1006,
        1007
      ])
      const generations = yield* sql<{ run_id: string; granted_at_ms: unknown }>`SELECT run_id, granted_at_ms
        FROM flows_runs ORDER BY run_id`
      expect(generations.map((g) => [g.run_id, g.granted_at_ms === null ? null : Number(g.granted_at_ms)])).toEqual([
        ["free", null],
        ["leased", 7],
        ["unleased", 4]
      ])
      expect(yield* head(sql)).toBe(revision)
      expect(yield* Dialect.tables(sql)).not.toContain("flows_consensus_leases")
      // The moved owner still owns its run through the row strategy: its fenced transition lands.
      const store = yield* RunStore.RunStore
      expect(yield* store.heartbeat("leased", A, 10)).toEqual({ _tag: "Updated", heartbeatAtMs: 10 })
      expect(yield* store.transitionOwned("leased", A, "completed")).toEqual({ _tag: "Transitioned" })
    }).pipe(Effect.provide(Layer.provideMerge(storeOn, makeDatabase()))))

  it.effect("0007 gives a running row the generation only its lease row recorded, then drops the table, changing no revision", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const upTo0006: DatabaseMigrations.MigrationSet = {
        ...Migrations.set,
        migrations: Object.fromEntries(Object.entries(Migrations.set.migrations).filter(([k]) => k < "0007"))
      }
      yield* DatabaseMigrations.run([JournalMigrations.set, upTo0006])
      // Owners a host older than 0005 activated after 0005 ran: through the lease table, mirrored onto
      // the row without a generation. One has its lease row, one has none; a third came through 0005.
      yield* sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms, owner_host_id, owner_pid,
        owner_nonce, heartbeat_at_ms, state_json) VALUES
        (1, 'leased', 'running', 0, 3, ${A.hostId}, ${A.pid}, ${A.nonce}, 9, '{}'),
        (2, 'unleased', 'running', 0, 4, ${A.hostId}, ${A.pid}, ${A.nonce}, 9, '{}')`
      yield* sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms, owner_host_id, owner_pid,
        owner_nonce, granted_at_ms, heartbeat_at_ms, state_json) VALUES
        (3, 'current', 'running', 0, 5, ${A.hostId}, ${A.pid}, ${A.nonce}, 6, 9, '{}')`
      yield* sql`INSERT INTO flows_consensus_leases (run_id, owner_host_id, owner_pid, owner_nonce, granted_at_ms,
        heartbeat_at_ms) VALUES ('leased', ${A.hostId}, ${A.pid}, ${A.nonce}, 7, 9),
        ('current', ${A.hostId}, ${A.pid}, ${A.nonce}, 1, 9)`
      const revision = yield* head(sql)
      const before = yield* changes(sql)
      expect((yield* DatabaseMigrations.run([JournalMigrations.set, Migrations.set])).map((m) => m.id)).toEqual([1007])
      const generations = yield* sql<{ run_id: string; granted_at_ms: unknown }>`SELECT run_id, granted_at_ms
        FROM flows_runs ORDER BY run_id`
      // A generation already on the row wins over a stale lease row.
      expect(generations.map((g) => [g.run_id, Number(g.granted_at_ms)])).toEqual([
        ["current", 6],
        ["leased", 7],
        ["unleased", 4]
      ])
      expect(yield* head(sql)).toBe(revision)
      expect(yield* changes(sql)).toEqual(before)
      expect(yield* Dialect.tables(sql)).not.toContain("flows_consensus_leases")
      // The trigger is back: the next change of a run records a revision again.
      const store = yield* RunStore.RunStore
      expect(yield* store.heartbeat("leased", A, 10)).toEqual({ _tag: "Updated", heartbeatAtMs: 10 })
      expect(yield* store.transitionOwned("leased", A, "completed")).toEqual({ _tag: "Transitioned" })
      expect(yield* head(sql)).toBe(revision + 1)
      const columns = (yield* Dialect.columns(sql, "flows_runs")).filter((c) => c !== "heartbeat_at_ms")
      expect([...(yield* triggerColumns(sql))].sort()).toEqual([...columns].sort())
    }).pipe(Effect.provide(Layer.provideMerge(storeOn, makeDatabase()))))

  it.effect("0007 on a database migrated without the journal's set (no lease table) applies and changes nothing", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      expect((yield* Migrations.run).map((m) => m.id)).toEqual([1001, 1002, 1003, 1004, 1005, 1006, 1007])
      expect(yield* Dialect.tables(sql)).not.toContain("flows_consensus_leases")
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      expect(yield* store.claimAndOwn("r", pending, A, 0)).toEqual({ _tag: "Activated" })
    }).pipe(Effect.provide(Layer.provideMerge(storeOn, makeDatabase()))))
}
