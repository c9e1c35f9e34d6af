/**
 * SQL statements of the journal tables (journal.md 4, 5). Every statement runs
 * on whatever transaction encloses it; callers hold the run's key and head lock.
 *
 * @internal
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { createHash } from "node:crypto"
import { Effect, Either } from "effect"
import type { Entry, RunId, Seq, SourceId, SourceSeq } from "../JournalEvent.js"
import { decodeFailed } from "./errors.js"
import { textProblem, toSafeInt } from "./text.js"

export interface EntryRow {
  readonly run_id: string
  readonly seq: unknown
  readonly event_id: string
  readonly source_id: string
  readonly source_seq: unknown
  readonly emitted_at_ms: unknown
  readonly event_type: string
  readonly payload_json: string
  readonly meta_json: string
}

/** A row to insert: content already canonical. */
export interface NewEntry {
  readonly runId: string
  readonly seq: number
  readonly eventId: string
  readonly sourceId: string
  readonly sourceSeq: number
  readonly emittedAtMs: number
  readonly eventType: string
  readonly payloadJson: string
  readonly metaJson: string
}

/** What an identity lookup found: a live row (content) or a tombstone (hash). */
export type FoundIdentity =
  | { readonly _tag: "Row"; readonly seq: number; readonly contentKey: string }
  | { readonly _tag: "Tombstone"; readonly seq: number; readonly contentHash: string }

/** The exact content compared for identity: `[event_type, payload_json, meta_json]` as JSON. */
export const contentKey = (eventType: string, payloadJson: string, metaJson: string): string =>
  JSON.stringify([eventType, payloadJson, metaJson])

export const contentHash = (key: string): string => createHash("sha256").update(key, "utf8").digest("hex")

/** Whether content with `key` equals what was found (a tombstone compares hashes). */
export const sameContent = (found: FoundIdentity, key: string): boolean =>
  found._tag === "Row" ? found.contentKey === key : found.contentHash === contentHash(key)

const validId = (value: unknown): value is string =>
  typeof value === "string" && value.length > 0 && value.length <= 1024 && textProblem(value) === undefined

const parseJson = (text: unknown): Either.Either<unknown, string> => {
  if (typeof text !== "string") return Either.left("not text")
  try {
    return Either.right(JSON.parse(text))
  } catch {
    return Either.left("not JSON")
  }
}

const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const member of Object.values(value)) deepFreeze(member)
  }
  return value
}

/** Decode one stored row; `decode_failed` names what is wrong. */
export const decodeEntry = (row: EntryRow) => {
  const seq = toSafeInt(row.seq)
  const sourceSeq = toSafeInt(row.source_seq)
  const emittedAtMs = toSafeInt(row.emitted_at_ms)
  const payload = parseJson(row.payload_json)
  const meta = parseJson(row.meta_json)
  if (
    seq === undefined || seq < 0 || sourceSeq === undefined || sourceSeq < 0 || emittedAtMs === undefined ||
    emittedAtMs < 0 || !validId(row.run_id) || !validId(row.source_id) || !validId(row.event_type) ||
    typeof row.event_id !== "string" || Either.isLeft(payload) || Either.isLeft(meta)
  ) {
    return Either.left(decodeFailed(`a stored journal row of run ${JSON.stringify(String(row.run_id))} does not decode`))
  }
  const entry: Entry = {
    runId: row.run_id as RunId,
    seq: seq as Seq,
    eventId: row.event_id,
    sourceId: row.source_id as SourceId,
    sourceSeq: sourceSeq as SourceSeq,
    emittedAtMs,
    eventType: row.event_type,
    payload: payload.right,
    meta: meta.right
  }
  return Either.right(deepFreeze(entry))
}

export const entryFromNew = (entry: NewEntry): Entry =>
  deepFreeze({
    runId: entry.runId as RunId,
    seq: entry.seq as Seq,
    eventId: entry.eventId,
    sourceId: entry.sourceId as SourceId,
    sourceSeq: entry.sourceSeq as SourceSeq,
    emittedAtMs: entry.emittedAtMs,
    eventType: entry.eventType,
    payload: JSON.parse(entry.payloadJson) as unknown,
    meta: JSON.parse(entry.metaJson) as unknown
  })

const entryColumns = "run_id, seq, event_id, source_id, source_seq, emitted_at_ms, event_type, payload_json, meta_json"

export const makeStore = (sql: SqlClient.SqlClient) => {
  const pg = Dialect.isPostgres(sql)
  const columns = sql.literal(entryColumns)

  /** Create the head if absent and lock it (row lock on PostgreSQL); answer `next_seq`. */
  const lockHead = (runId: string): Effect.Effect<number | undefined, SqlError> =>
    sql<{ readonly next_seq: unknown }>`INSERT INTO flows_journal_heads (run_id, next_seq) VALUES (${runId}, 0)
      ON CONFLICT (run_id) DO UPDATE SET next_seq = flows_journal_heads.next_seq
      RETURNING next_seq`.pipe(Effect.map((rows) => toSafeInt(rows[0]?.next_seq)))

  const setHead = (runId: string, nextSeq: number) =>
    sql`UPDATE flows_journal_heads SET next_seq = ${nextSeq} WHERE run_id = ${runId}`

  const findIdentity = (eventId: string): Effect.Effect<FoundIdentity | undefined, SqlError> =>
    Effect.gen(function*() {
      const rows = yield* sql<{ seq: unknown; event_type: string; payload_json: string; meta_json: string }>`
        SELECT seq, event_type, payload_json, meta_json FROM flows_journal_events WHERE event_id = ${eventId}`
      const row = rows[0]
      if (row !== undefined) {
        return { _tag: "Row", seq: toSafeInt(row.seq) ?? -1, contentKey: contentKey(row.event_type, row.payload_json, row.meta_json) } as const
      }
      const tombs = yield* sql<{ seq: unknown; content_hash: string }>`
        SELECT seq, content_hash FROM flows_journal_dedup WHERE event_id = ${eventId}`
      const tomb = tombs[0]
      return tomb === undefined ? undefined : { _tag: "Tombstone", seq: toSafeInt(tomb.seq) ?? -1, contentHash: tomb.content_hash } as const
    })

  /** 1 + the largest source_seq of the pair in events ∪ dedup (0 when none). */
  const durableNext = (runId: string, sourceId: string): Effect.Effect<number, SqlError> =>
    sql<{ readonly m: unknown }>`SELECT MAX(m) AS m FROM (
        SELECT MAX(source_seq) AS m FROM flows_journal_events WHERE run_id = ${runId} AND source_id = ${sourceId}
        UNION ALL
        SELECT MAX(source_seq) AS m FROM flows_journal_dedup WHERE run_id = ${runId} AND source_id = ${sourceId}
      ) floors`.pipe(Effect.map((rows) => {
      const max = toSafeInt(rows[0]?.m)
      return max === undefined ? 0 : max + 1
    }))

  const insert = (entry: NewEntry) =>
    sql`INSERT INTO flows_journal_events (${columns}) VALUES (${entry.runId}, ${entry.seq}, ${entry.eventId},
      ${entry.sourceId}, ${entry.sourceSeq}, ${entry.emittedAtMs}, ${entry.eventType}, ${entry.payloadJson},
      ${entry.metaJson})`

  /** Highest compacted checkpoint seq, or undefined. */
  const floor = (runId: string): Effect.Effect<number | undefined, SqlError> =>
    sql<{ readonly f: unknown }>`SELECT MAX(seq) AS f FROM flows_journal_checkpoints
      WHERE run_id = ${runId} AND compacted_at_ms IS NOT NULL`.pipe(Effect.map((rows) => toSafeInt(rows[0]?.f)))

  const page = (runId: string, after: number, eventTypes: ReadonlyArray<string> | undefined, limit: number) =>
    eventTypes === undefined
      ? sql<EntryRow>`SELECT ${columns} FROM flows_journal_events
          WHERE run_id = ${runId} AND seq > ${after} ORDER BY seq LIMIT ${limit}`
      : sql<EntryRow>`SELECT ${columns} FROM flows_journal_events
          WHERE run_id = ${runId} AND seq > ${after} AND ${sql.in("event_type", eventTypes)}
          ORDER BY seq LIMIT ${limit}`

  const entryExists = (runId: string, seq: number) =>
    sql<{ readonly seq: unknown }>`SELECT seq FROM flows_journal_events WHERE run_id = ${runId} AND seq = ${seq}`.pipe(
      Effect.map((rows) => rows.length > 0)
    )

  return { pg, lockHead, setHead, findIdentity, durableNext, insert, floor, page, entryExists } as const
}

export type Store = ReturnType<typeof makeStore>
