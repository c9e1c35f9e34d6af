/**
 * Checkpoint and compaction statements. Run inside the run's keyed write with
 * its head locked. Numbers read back are range-checked like entries.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Either } from "effect"
import type { Checkpoint, JournalError } from "../Journal.js"
import type { RunId, Seq } from "../JournalEvent.js"
import { contentHash, contentKey, seqRule, storedProblem, storedSeq, storedTime } from "./store.js"
import { toSeq } from "./text.js"

interface CheckpointRow {
  readonly run_id: string
  readonly seq: unknown
  readonly state_json: string
  readonly created_at_ms: unknown
  readonly compacted_at_ms: unknown
}

/** Decode one stored checkpoint; `decode_failed` names the column and the rule it breaks. */
export const decodeCheckpoint = (row: CheckpointRow): Either.Either<Checkpoint, JournalError> =>
  Either.gen(function*() {
    const seq = toSeq(row.seq)
    if (seq === undefined) return yield* Either.left(storedProblem("checkpoint", row.run_id, `seq: ${seqRule}`))
    const createdAtMs = yield* storedTime(row.created_at_ms, "checkpoint", row.run_id, "created_at_ms")
    const compactedAtMs = row.compacted_at_ms === null
      ? null
      : yield* storedTime(row.compacted_at_ms, "checkpoint", row.run_id, "compacted_at_ms")
    let state: unknown
    try {
      if (typeof row.state_json !== "string") throw new TypeError("not text")
      state = JSON.parse(row.state_json)
    } catch {
      return yield* Either.left(storedProblem("checkpoint", row.run_id, "state_json: not JSON"))
    }
    const checkpoint: Checkpoint = { runId: row.run_id as RunId, seq: seq as Seq, state, createdAtMs, compactedAtMs }
    return checkpoint
  })

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
        // A tombstone keeps the row's identity: a number out of range is refused, never replaced.
        const tombstones = yield* Effect.forEach(rows, (row) =>
          Effect.gen(function*() {
            return {
              run_id: runId,
              source_id: row.source_id,
              source_seq: yield* storedSeq(row.source_seq, "journal row", runId, "source_seq"),
              event_id: row.event_id,
              seq: yield* storedSeq(row.seq, "journal row", runId, "seq"),
              content_hash: contentHash(contentKey(row.event_type, row.payload_json, row.meta_json))
            }
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
