/**
 * PostgreSQL-only checks 43–46: lock protocol, schema parity, lock keys, clock authority.
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as Consensus from "@baton/journal/Consensus"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Layer, Scope, TestClock } from "effect"
import { A, B, C, ev, pending, running, stack } from "./support/stack.js"

const url = TestDatabase.postgresTestUrl("run-store postgres")

const serverMs = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(
    sql<{ ms: number }>`SELECT floor(extract(epoch from clock_timestamp()) * 1000)::bigint AS ms`,
    (rows) => Number(rows[0]!.ms)
  ))

/** A second host: its own pool on the first host's schema, with its own stores. */
const secondHost = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ s: string }>`SELECT current_schema() AS s`
  const scope = yield* Scope.Scope
  return yield* Layer.buildWithScope(stack(PgDatabase.layer({ url: url!, schema: rows[0]!.s })), scope)
})

/** The newest revision handed out: tombstones stay, so it never goes down. */
const revision = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(sql<{ r: number }>`SELECT MAX(revision) AS r FROM flows_run_changes`, (rows) => Number(rows[0]!.r)))

describe.skipIf(url === undefined)("PostgreSQL protocol", () => {
  const layer = () => stack(TestDatabase.layerPostgres(url!))

  it.live("43: ten fibers over two pools: tagged outcomes, CHECKs hold, revisions count state changes", () =>
    Effect.gen(function*() {
      const host2 = yield* secondHost
      const store = yield* RunStore.RunStore
      const runs = ["p0", "p1", "p2", "p3", "p4"]
      for (const id of runs) yield* store.create(id, "{}")
      const before = yield* revision
      let changes = 0
      const fiber = (k: number) =>
        Effect.gen(function*() {
          const s = yield* RunStore.RunStore
          const me = { hostId: `host-${k % 2}`, pid: k, nonce: `n${k}` }
          for (let i = 0; i < 12; i++) {
            const id = runs[(k + i) % runs.length]!
            switch ((k * 7 + i) % 4) {
              case 0: {
                const row = yield* s.get(id)
                if (row.status === "pending" || row.status === "suspended") {
                  const out = yield* s.claimAndOwn(id, row, me, 0)
                  if (out._tag === "Activated") changes++
                }
                break
              }
              case 1:
                yield* s.heartbeat(id, me, i)
                break
              case 2: {
                const out = yield* s.requestCancel(id, i)
                if (out._tag === "CancelRequested") changes++
                break
              }
              default: {
                const out = yield* s.transitionOwned(id, me, i % 2 === 0 ? "suspended" : "running")
                if (out._tag === "Transitioned") changes++
              }
            }
          }
        })
      yield* Effect.all(
        Array.from({ length: 10 }, (_, k) => k % 2 === 0 ? fiber(k) : Effect.provide(fiber(k), host2)),
        { concurrency: 10 }
      )
      expect((yield* revision) - before).toBe(changes)
      for (const id of runs) yield* store.get(id) // every row still decodes (owner CHECKs and invariants)
      yield* store.create("three", "{}")
      const outcomes = yield* Effect.all([
        store.requestCancel("three", 1),
        Effect.provide(Effect.flatMap(RunStore.RunStore, (s) => s.requestCancel("three", 2)), host2),
        store.requestCancel("three", 3)
      ], { concurrency: 3 })
      expect(outcomes.filter((o) => o._tag === "CancelRequested").length).toBe(1)
    }).pipe(Effect.provide(layer()), Effect.scoped))

  it.effect("44: schema parity: BIGINT rows decode as on SQLite; CHECKs refuse bad JSON; renames are refused", () =>
    Effect.gen(function*() {
      const big = 9_007_199_254_740_991
      const insert = (sql: SqlClient.SqlClient) =>
        sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms, owner_host_id, owner_pid,
          owner_nonce, heartbeat_at_ms, cancel_requested_at_ms, lineage_id, round_ordinal, state_json)
          VALUES (${big}, 'big', 'running', ${big}, ${big}, 'h', ${big}, 'n', ${big}, ${big}, 'L', ${big}, '{"a":1}')`
      const read = Effect.gen(function*() {
        yield* insert(yield* SqlClient.SqlClient)
        return yield* Effect.flatMap(RunStore.RunStore, (s) => s.get("big"))
      })
      const onPg = yield* Effect.provide(read, layer())
      const onSqlite = yield* Effect.provide(read, stack(TestDatabase.layer))
      expect(onPg).toEqual(onSqlite)
      expect(onPg.heartbeatAtMs).toBe(big)

      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const store = yield* RunStore.RunStore
        yield* store.create("r", "{}")
        for (const statement of [
          sql`UPDATE flows_runs SET state_json = 'not-json' WHERE run_id = 'r'`,
          sql`UPDATE flows_runs SET cancel_acknowledgement_json = '{' WHERE run_id = 'r'`,
          sql`UPDATE flows_runs SET state_json = ${'{"v":"\\u0000"}'} WHERE run_id = 'r'`,
          sql`UPDATE flows_runs SET run_id = 'renamed' WHERE run_id = 'r'`
        ]) {
          const refused = yield* Effect.either(statement)
          expect(Either.isLeft(refused) && DurableWriter.codeOf(refused.left)).toBe("constraint")
        }
        expect((yield* Effect.flip(store.create("s", '{"v":"\\u0000"}'))).code).toBe("invalid_run")
        expect(Dialect.isPostgres(sql)).toBe(true)
      }).pipe(Effect.provide(layer()))
    }))

  it.live("45: different runs' writes overlap; same-run writes wait for the holder's commit", () =>
    Effect.gen(function*() {
      const host2 = yield* secondHost
      const store = yield* RunStore.RunStore
      const writer = yield* DurableWriter.DurableWriter
      const order: Array<string> = []
      for (const id of ["r1", "r2"]) {
        yield* store.create(id, "{}", { lineageId: id, roundOrdinal: 0 })
        expect(yield* store.claimAndOwn(id, pending, A, 0)).toEqual({ _tag: "Activated" })
      }
      const store2 = Context.get(host2, RunStore.RunStore)
      const held = writer.write(
        Effect.gen(function*() {
          expect(yield* store.heartbeat("r1", A, 5_000)).toEqual({ _tag: "Updated", heartbeatAtMs: 5_000 })
          yield* Effect.sleep(300)
          order.push("host1 commit")
        }),
        { key: "r1" }
      )
      const other = Effect.zipRight(
        Effect.sleep(50),
        Effect.tap(store2.heartbeat("r2", A, 1), () => Effect.sync(() => order.push("host2 r2")))
      )
      const same = Effect.zipRight(
        Effect.sleep(50),
        Effect.tap(
          store2.heartbeat("r1", A, 4_000),
          (out) => Effect.sync(() => order.push(`host2 r1 ${out._tag === "Updated" ? `Updated ${out.heartbeatAtMs}` : out._tag}`))
        )
      )
      yield* Effect.all([held, other, same], { concurrency: 3 })
      expect(order).toEqual([
        "host2 r2",
        "host1 commit",
        "host2 r1 Updated 5000"
      ])
      const cancels = yield* Effect.all([store.requestCancelLineage("r1", 1), store2.requestCancel("r1", 2)], {
        concurrency: 2
      })
      expect(cancels.filter((c) => c._tag === "CancelRequested").length).toBe(1)
    }).pipe(Effect.provide(layer()), Effect.scoped))

  it.effect("46: the database clock is the reference: a host ahead is refused, a host behind loses only its own runs", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const consensus = yield* Consensus.Consensus
      const sql = yield* SqlClient.SqlClient
      const now = yield* serverMs
      yield* TestClock.setTime(now)
      // A correct owner holds "live"; a host 60 s ahead cannot steal it or pin leases.
      yield* store.create("live", "{}")
      expect(yield* store.claimAndOwn("live", pending, A, now)).toEqual({ _tag: "Activated" })
      const ahead = (yield* serverMs) + 60_000
      const rowsBefore = yield* sql`SELECT * FROM flows_runs ORDER BY run_id`
      const liveRow = yield* store.get("live")
      yield* store.create("free", "{}")
      for (
        const call of [
          store.claim("free", pending, C, ahead),
          store.claimAndOwn("free", pending, C, ahead),
          store.steal("live", liveRow, C, ahead, { expectedOwner: A, checkedAtMs: ahead, kind: "lease-expired" }),
          store.heartbeat("live", A, ahead),
          store.reconfirm("live", A, ahead),
          store.recoverClaim("free", C, 0, B, ahead, ev(C, B, ahead)),
          // A missing run: the clock is still read (with the row lock) and refuses first.
          store.heartbeat("missing", A, ahead),
          store.claimAndOwn("missing", pending, C, ahead)
        ] as ReadonlyArray<Effect.Effect<unknown, RunStore.RunStoreError>>
      ) {
        const error = yield* Effect.flip(call)
        expect(error.code).toBe("invalid_run")
        const cause = error.cause as { field: string; nowMs: number; clockMs: number; detail: string }
        expect([cause.field, cause.nowMs, cause.detail]).toEqual(["nowMs", ahead, "database clock"])
        // The database clock, not the host's 60 s lead; the slack is the loop's real time, so it is wide.
        expect(Math.abs(cause.clockMs - (ahead - 60_000))).toBeLessThan(30_000)
      }
      expect(yield* sql`SELECT * FROM flows_runs WHERE run_id <> 'free' ORDER BY run_id`).toEqual(rowsBefore)

      // A run owned before the owner's clock jumped ages by the server clock: a correct peer takes over.
      yield* store.create("aged", "{}")
      const old = (yield* serverMs) - 31_000
      expect(yield* store.claimAndOwn("aged", pending, A, old)).toEqual({ _tag: "Activated" })
      const peerNow = yield* serverMs
      expect(yield* store.claimAndOwn("aged", running(A, old), C, peerNow, {
        expectedOwner: A,
        checkedAtMs: peerNow,
        kind: "lease-expired"
      })).toEqual({ _tag: "Activated" })

      // A host 60 s behind: admitted, but it cannot take a live owner's run or lower a stamp ...
      const behind = (yield* serverMs) - 60_000
      expect(yield* store.claimAndOwn("live", liveRow, B, behind, ev(A, B, behind))).toEqual({ _tag: "HeartbeatFresh" })
      expect(yield* store.steal("live", liveRow, B, behind, ev(A, B, behind))).toEqual({ _tag: "HeartbeatFresh" })
      const stamp = (yield* store.get("live")).heartbeatAtMs!
      expect(yield* store.heartbeat("live", A, behind)).toEqual({ _tag: "Updated", heartbeatAtMs: stamp })
      // ... and a run it activates carries old stamps, so a correct peer takes it over.
      yield* store.create("lagging", "{}")
      expect(yield* store.claimAndOwn("lagging", pending, B, behind)).toEqual({ _tag: "Activated" })
      const peer = yield* serverMs
      expect(yield* store.claimAndOwn("lagging", running(B, behind), C, peer, {
        expectedOwner: B,
        checkedAtMs: peer,
        kind: "lease-expired"
      })).toEqual({ _tag: "Activated" })
      expect(yield* store.heartbeat("lagging", B, behind + 1)).toEqual({ _tag: "FenceLost" })
      expect(yield* store.transitionOwned("lagging", B, "completed")).toEqual({ _tag: "FenceLost" })
      expect((yield* consensus.claim("free", C, 0))._tag).toBe("Granted")
    }).pipe(Effect.provide(layer())))
})

