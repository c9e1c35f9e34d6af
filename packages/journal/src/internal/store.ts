/**
 * SQL statements of the journal tables. Every statement runs on whatever
 * transaction encloses it; callers hold the run's key and head lock. Every
 * number read back is checked against the range its type promises (a `seq` or
 * `source_seq` below `Number.MAX_SAFE_INTEGER`, a time at or above 0): a row
 * outside it is `decode_failed`, never a value the types rule out.
 *
 * @internal
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { createHash } from "node:crypto"
import { Effect, Either } from "effect"
import type { Entry, RunId, Seq, SourceId, SourceSeq } from "../JournalEvent.js"
import type { JournalError } from "../Journal.js"
import { decodeFailed } from "./errors.js"
import { maxSeq, maxStoredInt, textProblem, toSeq, toStoredInt } from "./text.js"

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

/** The rule a stored seq-like value breaks, as `decode_failed` messages name it. */
export const seqRule = `not an integer in 0..${maxSeq}`
const timeRule = `not an integer in 0..${maxStoredInt}`

/** The first column of `row` that does not decode, with the rule it breaks. */
const entryProblem = (row: EntryRow): string | undefined => {
  if (!validId(row.run_id)) return "run_id: not an identifier"
  if (toSeq(row.seq) === undefined) return `seq: ${seqRule}`
  if (typeof row.event_id !== "string") return "event_id: not text"
  if (!validId(row.source_id)) return "source_id: not an identifier"
  if (toSeq(row.source_seq) === undefined) return `source_seq: ${seqRule}`
  if (toStoredInt(row.emitted_at_ms) === undefined) return `emitted_at_ms: ${timeRule}`
  if (!validId(row.event_type)) return "event_type: not an identifier"
  const payload = parseJson(row.payload_json)
  if (Either.isLeft(payload)) return `payload_json: ${payload.left}`
  const meta = parseJson(row.meta_json)
  if (Either.isLeft(meta)) return `meta_json: ${meta.left}`
  return undefined
}

/** A stored value of `runId` that does not decode; the message names the column and rule, never the value. */
export const storedProblem = (what: string, runId: string, problem: string): JournalError =>
  decodeFailed(`a stored ${what} of run ${JSON.stringify(String(runId))} does not decode (${problem})`)

/** A stored `seq`-like value of `what`, or `decode_failed` naming its column. */
export const storedSeq = (
  value: unknown,
  what: string,
  runId: string,
  column: string
): Effect.Effect<number, JournalError> => {
  const n = toSeq(value)
  return n === undefined ? Effect.fail(storedProblem(what, runId, `${column}: ${seqRule}`)) : Effect.succeed(n)
}

/** A stored time of `what`, or `decode_failed` naming its column. */
export const storedTime = (
  value: unknown,
  what: string,
  runId: string,
  column: string
): Either.Either<number, JournalError> => {
  const n = toStoredInt(value)
  return n === undefined ? Either.left(storedProblem(what, runId, `${column}: ${timeRule}`)) : Either.right(n)
}

/** Decode one stored row; `decode_failed` names the column and the rule it breaks. */
export const decodeEntry = (row: EntryRow): Either.Either<Entry, JournalError> => {
  const problem = entryProblem(row)
  if (problem !== undefined) return Either.left(storedProblem("journal row", row.run_id, problem))
  const entry: Entry = {
    runId: row.run_id as RunId,
    seq: toSeq(row.seq) as Seq,
    eventId: row.event_id,
    sourceId: row.source_id as SourceId,
    sourceSeq: toSeq(row.source_seq) as SourceSeq,
    emittedAtMs: toStoredInt(row.emitted_at_ms)!,
    eventType: row.event_type,
    payload: JSON.parse(row.payload_json) as unknown,
    meta: JSON.parse(row.meta_json) as unknown
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
  const lockHead = (runId: string): Effect.Effect<number, SqlError | JournalError> =>
    sql<{ readonly next_seq: unknown }>`INSERT INTO flows_journal_heads (run_id, next_seq) VALUES (${runId}, 0)
      ON CONFLICT (run_id) DO UPDATE SET next_seq = flows_journal_heads.next_seq
      RETURNING next_seq`.pipe(Effect.flatMap((rows) => storedSeq(rows[0]?.next_seq, "journal head", runId, "next_seq")))

  const setHead = (runId: string, nextSeq: number) =>
    sql`UPDATE flows_journal_heads SET next_seq = ${nextSeq} WHERE run_id = ${runId}`

  const findIdentity = (
    runId: string,
    eventId: string
  ): Effect.Effect<FoundIdentity | undefined, SqlError | JournalError> =>
    Effect.gen(function*() {
      const rows = yield* sql<{ seq: unknown; event_type: string; payload_json: string; meta_json: string }>`
        SELECT seq, event_type, payload_json, meta_json FROM flows_journal_events WHERE event_id = ${eventId}`
      const row = rows[0]
      if (row !== undefined) {
        const seq = yield* storedSeq(row.seq, "journal row", runId, "seq")
        return { _tag: "Row", seq, contentKey: contentKey(row.event_type, row.payload_json, row.meta_json) } as const
      }
      const tombs = yield* sql<{ seq: unknown; content_hash: string }>`
        SELECT seq, content_hash FROM flows_journal_dedup WHERE event_id = ${eventId}`
      const tomb = tombs[0]
      if (tomb === undefined) return undefined
      const seq = yield* storedSeq(tomb.seq, "journal tombstone", runId, "seq")
      return { _tag: "Tombstone", seq, contentHash: tomb.content_hash } as const
    })

  /** 1 + the largest source_seq of the pair in events ∪ dedup (0 when none). */
  const durableNext = (runId: string, sourceId: string): Effect.Effect<number, SqlError | JournalError> =>
    sql<{ readonly m: unknown }>`SELECT MAX(m) AS m FROM (
        SELECT MAX(source_seq) AS m FROM flows_journal_events WHERE run_id = ${runId} AND source_id = ${sourceId}
        UNION ALL
        SELECT MAX(source_seq) AS m FROM flows_journal_dedup WHERE run_id = ${runId} AND source_id = ${sourceId}
      ) floors`.pipe(Effect.flatMap((rows) => {
      const max = rows[0]?.m ?? null
      return max === null
        ? Effect.succeed(0)
        : Effect.map(storedSeq(max, "journal row", runId, "source_seq"), (n) => n + 1)
    }))

  /**
   * Insert unless a row already holds `(run_id, seq)`; answer whether it was
   * inserted. The head is locked, so a row there means the head disagrees with
   * the stored rows; `DO NOTHING` lets the caller name that instead of a
   * constraint violation aborting the transaction.
   */
  const insert = (entry: NewEntry): Effect.Effect<boolean, SqlError> =>
    sql<{ readonly seq: unknown }>`INSERT INTO flows_journal_events (${columns}) VALUES (${entry.runId}, ${entry.seq},
      ${entry.eventId}, ${entry.sourceId}, ${entry.sourceSeq}, ${entry.emittedAtMs}, ${entry.eventType},
      ${entry.payloadJson}, ${entry.metaJson})
      ON CONFLICT (run_id, seq) DO NOTHING RETURNING seq`.pipe(Effect.map((rows) => rows.length > 0))

  /** Highest compacted checkpoint seq, or undefined. */
  const floor = (runId: string): Effect.Effect<number | undefined, SqlError | JournalError> =>
    sql<{ readonly f: unknown }>`SELECT MAX(seq) AS f FROM flows_journal_checkpoints
      WHERE run_id = ${runId} AND compacted_at_ms IS NOT NULL`.pipe(Effect.flatMap((rows) => {
      const f = rows[0]?.f ?? null
      return f === null ? Effect.succeed(undefined) : storedSeq(f, "checkpoint", runId, "seq")
    }))

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

  /**
   * SQLite, inside the caller's write transaction (which holds the write lock): append `items` (one run and
   * source, content canonical) after the head and the source floor in one `INSERT … SELECT`, then move the
   * head. Answers the first seq and source_seq; a stored value outside its range is `decode_failed`.
   */
  const appendAll = (
    runId: string,
    sourceId: string,
    eventIdPrefix: string,
    items: ReadonlyArray<{ readonly eventType: string; readonly payloadJson: string; readonly metaJson: string; readonly emittedAtMs: number }>
  ): Effect.Effect<{ readonly seq: number; readonly sourceSeq: number }, SqlError | JournalError> =>
    Effect.gen(function*() {
      // Bound numbers arrive as REAL: the event id's text takes the integer.
      const values = sql.join(" UNION ALL ", false)(
        items.map((item, i) =>
          sql`SELECT ${i} AS i, ${item.eventType} AS t, ${item.payloadJson} AS p, ${item.metaJson} AS m, ${item.emittedAtMs} AS at`
        )
      )
      const rows = yield* sql<{ readonly seq: unknown; readonly source_seq: unknown }>`INSERT INTO flows_journal_events
        (${columns})
        SELECT ${runId}, h.n + v.i, ${eventIdPrefix} || CAST(s.n + v.i AS INTEGER), ${sourceId}, s.n + v.i, v.at, v.t, v.p, v.m
        FROM (SELECT COALESCE((SELECT next_seq FROM flows_journal_heads WHERE run_id = ${runId}), 0) AS n) AS h,
          (SELECT COALESCE(MAX(m), -1) + 1 AS n FROM (
            SELECT MAX(source_seq) AS m FROM flows_journal_events WHERE run_id = ${runId} AND source_id = ${sourceId}
            UNION ALL
            SELECT MAX(source_seq) AS m FROM flows_journal_dedup WHERE run_id = ${runId} AND source_id = ${sourceId}
          ) floors) AS s,
          (${values}) AS v
        ORDER BY v.i
        RETURNING seq, source_seq`
      let seq = Number.MAX_SAFE_INTEGER
      let sourceSeq = Number.MAX_SAFE_INTEGER
      let last = -1
      for (const row of rows) {
        const at = yield* storedSeq(row.seq, "journal row", runId, "seq")
        seq = Math.min(seq, at)
        last = Math.max(last, at)
        sourceSeq = Math.min(sourceSeq, yield* storedSeq(row.source_seq, "journal row", runId, "source_seq"))
      }
      if (rows.length !== items.length || last + 1 > maxSeq) {
        return yield* Effect.fail(decodeFailed(`the journal head of run ${JSON.stringify(String(runId))} is out of range`))
      }
      yield* sql`INSERT INTO flows_journal_heads (run_id, next_seq) VALUES (${runId}, ${last + 1})
        ON CONFLICT (run_id) DO UPDATE SET next_seq = excluded.next_seq`
      return { seq, sourceSeq }
    })

  /**
   * One fenced entry with an allocated source_seq, as one statement behind the fence: `fence` is the
   * strategy's row query (one row while the owner holds the run). The entry's seq is the head, its
   * source_seq the larger of the stored floor and `sourceFloor` (what this process holds). Answers
   * `NoFence` when the fence row is absent (PostgreSQL locks it first, so that is final; SQLite re-reads it
   * on this losing path), nothing written. A row already at the head's seq is `SeqTaken` on SQLite (nothing
   * written) and fails the statement on PostgreSQL (`baton:seq_taken:<seq>`, the caller's transaction is
   * spoilt as by any failed statement). SQLite moves the head in a second statement; PostgreSQL's
   * `flows_journal_append` moves it in the same one.
   */
  const appendFenced = (
    fence: Statement.Fragment,
    item: {
      readonly runId: string
      readonly sourceId: string
      readonly eventType: string
      readonly payloadJson: string
      readonly metaJson: string
      readonly emittedAtMs: number
    },
    eventIdPrefix: string,
    sourceFloor: number
  ): Effect.Effect<
    | { readonly _tag: "Appended"; readonly seq: number; readonly sourceSeq: number }
    | { readonly _tag: "NoFence" }
    | { readonly _tag: "SeqTaken"; readonly seq: number },
    SqlError | JournalError
  > =>
    Effect.gen(function*() {
      const { runId, sourceId } = item
      if (pg) {
        const rows = yield* sql<{ readonly a: unknown }>`WITH fence AS MATERIALIZED (${fence})
          SELECT flows_journal_append(${runId}, ${sourceId}, ${eventIdPrefix}, ${item.emittedAtMs},
            ${[item.eventType]}::text[], ${[item.payloadJson]}::text[], ${[item.metaJson]}::text[],
            ${sourceFloor}::bigint) AS a FROM fence`
        if (rows.length === 0) return { _tag: "NoFence" } as const
        const pair = Array.isArray(rows[0]!.a) ? rows[0]!.a as ReadonlyArray<unknown> : []
        const seq = yield* storedSeq(pair[0], "journal head", runId, "next_seq")
        return { _tag: "Appended", seq, sourceSeq: yield* storedSeq(pair[1], "journal row", runId, "source_seq") } as const
      }
      const rows = yield* sql<{ readonly seq: unknown; readonly source_seq: unknown }>`INSERT INTO flows_journal_events
        (${columns})
        SELECT ${runId}, h.n, ${eventIdPrefix} || CAST(s.n AS INTEGER), ${sourceId}, s.n, ${item.emittedAtMs},
          ${item.eventType}, ${item.payloadJson}, ${item.metaJson}
        FROM (SELECT COALESCE((SELECT next_seq FROM flows_journal_heads WHERE run_id = ${runId}), 0) AS n) AS h,
          (SELECT MAX(COALESCE(MAX(m), -1) + 1, ${sourceFloor}) AS n FROM (
            SELECT MAX(source_seq) AS m FROM flows_journal_events WHERE run_id = ${runId} AND source_id = ${sourceId}
            UNION ALL
            SELECT MAX(source_seq) AS m FROM flows_journal_dedup WHERE run_id = ${runId} AND source_id = ${sourceId}
          ) floors) AS s
        WHERE EXISTS (${fence})
        ON CONFLICT (run_id, seq) DO NOTHING
        RETURNING seq, source_seq`
      const row = rows[0]
      if (row === undefined) {
        if ((yield* sql`${fence}`).length === 0) return { _tag: "NoFence" } as const
        const heads = yield* sql<{ readonly next_seq: unknown }>`SELECT next_seq FROM flows_journal_heads
          WHERE run_id = ${runId}`
        return { _tag: "SeqTaken", seq: yield* storedSeq(heads[0]?.next_seq ?? 0, "journal head", runId, "next_seq") } as const
      }
      const seq = yield* storedSeq(row.seq, "journal row", runId, "seq")
      const sourceSeq = yield* storedSeq(row.source_seq, "journal row", runId, "source_seq")
      yield* sql`INSERT INTO flows_journal_heads (run_id, next_seq) VALUES (${runId}, ${seq + 1})
        ON CONFLICT (run_id) DO UPDATE SET next_seq = excluded.next_seq`
      return { _tag: "Appended", seq, sourceSeq } as const
    })

  return { pg, lockHead, setHead, findIdentity, durableNext, insert, floor, page, entryExists, appendAll, appendFenced } as const
}

export type Store = ReturnType<typeof makeStore>
