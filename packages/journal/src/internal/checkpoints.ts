/**
 * Checkpoint and compaction statements (journal.md 5.8). Run inside the run's
 * keyed write with its head locked.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Either } from "effect"
import type { Checkpoint } from "../Journal.js"
import type { RunId, Seq } from "../JournalEvent.js"
import { decodeFailed } from "./errors.js"
import { contentHash, contentKey } from "./store.js"
import { toSafeInt } from "./text.js"

interface CheckpointRow {
  readonly run_id: string
  readonly seq: unknown
  readonly state_json: string
  readonly created_at_ms: unknown
  readonly compacted_at_ms: unknown
}

export const decodeCheckpoint = (row: CheckpointRow) => {
  const seq = toSafeInt(row.seq)
  const createdAtMs = toSafeInt(row.created_at_ms)
  const compactedAtMs = row.compacted_at_ms === null ? null : toSafeInt(row.compacted_at_ms)
  let state: unknown
  try {
    state = JSON.parse(row.state_json)
  } catch {
    return Either.left(decodeFailed(`a stored checkpoint of run ${JSON.stringify(row.run_id)} does not decode`))
  }
  if (seq === undefined || createdAtMs === undefined || compactedAtMs === undefined) {
    return Either.left(decodeFailed(`a stored checkpoint of run ${JSON.stringify(row.run_id)} does not decode`))
  }
  const checkpoint: Checkpoint = {
    runId: row.run_id as RunId,
    seq: seq as Seq,
    state,
    createdAtMs,
    compactedAtMs
  }
  return Either.right(checkpoint)
}

const pageSize = 256

export const makeCheckpointStore = (sql: SqlClient.SqlClient) => {
  const columns = sql.literal("run_id, seq, state_json, created_at_ms, compacted_at_ms")

  const upsert = (runId: string, seq: number, stateJson: string, nowMs: number) =>
    sql`INSERT INTO flows_journal_checkpoints (run_id, seq, state_json, created_at_ms, compacted_at_ms)
      VALUES (${runId}, ${seq}, ${stateJson}, ${nowMs}, NULL)
      ON CONFLICT (run_id, seq) DO UPDATE SET state_json = excluded.state_json,
        created_at_ms = excluded.created_at_ms, compacted_at_ms = NULL`

  const latest = (runId: string) =>
    sql<CheckpointRow>`SELECT ${columns} FROM flows_journal_checkpoints WHERE run_id = ${runId}
      ORDER BY seq DESC LIMIT 1`.pipe(Effect.map((rows) => rows[0]))

  const at = (runId: string, seq: number) =>
    sql<CheckpointRow>`SELECT ${columns} FROM flows_journal_checkpoints WHERE run_id = ${runId} AND seq = ${seq}`.pipe(
      Effect.map((rows) => rows[0])
    )

  /** Move every entry below `checkpointSeq` to tombstones, 256 per page; answer how many. */
  const compactBelow = (runId: string, checkpointSeq: number, nowMs: number) =>
    Effect.gen(function*() {
      let deleted = 0
      for (;;) {
        const rows = yield* sql<{
          readonly source_id: string
          readonly source_seq: unknown
          readonly event_id: string
          readonly seq: unknown
          readonly event_type: string
          readonly payload_json: string
          readonly meta_json: string
        }>`SELECT source_id, source_seq, event_id, seq, event_type, payload_json, meta_json
          FROM flows_journal_events WHERE run_id = ${runId} AND seq < ${checkpointSeq}
          ORDER BY seq LIMIT ${pageSize}`
        if (rows.length === 0) break
        const tombstones = rows.map((row) => ({
          run_id: runId,
          source_id: row.source_id,
          source_seq: toSafeInt(row.source_seq) ?? 0,
          event_id: row.event_id,
          seq: toSafeInt(row.seq) ?? 0,
          content_hash: contentHash(contentKey(row.event_type, row.payload_json, row.meta_json))
        }))
        yield* sql`INSERT INTO flows_journal_dedup ${sql.insert(tombstones)}`
        const last = tombstones[tombstones.length - 1]!.seq
        yield* sql`DELETE FROM flows_journal_events WHERE run_id = ${runId} AND seq <= ${last}`
        deleted += rows.length
      }
      yield* sql`DELETE FROM flows_journal_checkpoints WHERE run_id = ${runId} AND seq < ${checkpointSeq}`
      yield* sql`UPDATE flows_journal_checkpoints SET compacted_at_ms = ${nowMs}
        WHERE run_id = ${runId} AND seq = ${checkpointSeq}`
      return deleted
    })

  return { upsert, latest, at, compactBelow } as const
}
