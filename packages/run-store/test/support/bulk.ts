/**
 * Many running runs at once: rows inserted as `claimAndOwn` leaves them, in one write,
 * without ownership facts (for batch tests that need more runs than per-run claims afford).
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { nextRowSeq } from "./rowSeq.js"

type Owner = { readonly hostId: string; readonly pid: number; readonly nonce: string }

/** Inserts each id as `running`, owned by `ownerOf(index)`, granted and stamped at `atMs`. */
export const insertOwned = (ids: ReadonlyArray<string>, ownerOf: (index: number) => Owner, atMs = 0) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter
    if (Dialect.isPostgres(sql)) {
      const owners = ids.map((_, i) => ownerOf(i))
      yield* writer.write(sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms,
          owner_host_id, owner_pid, owner_nonce, granted_at_ms, heartbeat_at_ms, state_json)
        SELECT ${nextRowSeq(sql)}, l.run_id, 'running', ${atMs}, ${atMs}, l.host_id, l.pid, l.nonce, ${atMs}, ${atMs}, '{}'
        FROM unnest(${ids}::text[], ${owners.map((o) => o.hostId)}::text[], ${owners.map((o) => o.pid)}::bigint[],
          ${owners.map((o) => o.nonce)}::text[]) AS l(run_id, host_id, pid, nonce)`)
      return
    }
    // SQLite numbers each row from the rows before it, so one insert per run (in one transaction).
    yield* writer.write(Effect.forEach(ids, (id, i) => {
      const owner = ownerOf(i)
      return sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms,
          owner_host_id, owner_pid, owner_nonce, granted_at_ms, heartbeat_at_ms, state_json)
        VALUES (${nextRowSeq(sql)}, ${id}, 'running', ${atMs}, ${atMs},
          ${owner.hostId}, ${owner.pid}, ${owner.nonce}, ${atMs}, ${atMs}, '{}')`
    }, { discard: true }))
  })

/** The stored heartbeat stamps of `ids`, by id. */
export const stamps = (ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly run_id: string; readonly heartbeat_at_ms: number | string | null }>`SELECT
      run_id, heartbeat_at_ms FROM flows_runs WHERE ${sql.in("run_id", ids)}`
    return new Map(rows.map((row) => [row.run_id, row.heartbeat_at_ms === null ? null : Number(row.heartbeat_at_ms)]))
  })
