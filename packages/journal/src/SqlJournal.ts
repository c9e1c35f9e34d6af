/**
 * The journal over `@effect/sql` (docs/design/journal.md): per-run head rows allocate
 * `seq` inside the inserting transaction, so sequence order equals commit
 * order; every write goes through `DurableWriter.write` keyed by the run; fenced
 * writes consult `Consensus.guard` inside the same transaction.
 *
 * @since 0.1.0
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Chunk, Clock, Deferred, Effect, FiberRef, Layer, Option, PubSub, Queue, Schema, Stream } from "effect"
import type * as Duration from "effect/Duration"
import type * as Scope from "effect/Scope"
import { Consensus } from "./Consensus.js"
import type { ConsensusError } from "./Consensus.js"
import * as Journal from "./Journal.js"
import * as JournalEvent from "./JournalEvent.js"
import type { OwnerId } from "./OwnerId.js"
import type * as Redaction from "./Redaction.js"
import { admit, type Admitted, admitClock, admitOwner, encodeJson } from "./internal/admission.js"
import { appendLocked } from "./internal/append.js"
import { decodeCheckpoint, makeCheckpointStore } from "./internal/checkpoints.js"
import * as Errors from "./internal/errors.js"
import * as FactJoin from "./internal/factJoin.js"
import { makeIdentityCache } from "./internal/identityCache.js"
import { makeLossy } from "./internal/lossy.js"
import { resolve } from "./internal/options.js"
import { maxSeq } from "./internal/text.js"
import { decodeField as field } from "./internal/parse.js"
import { makeReaders } from "./internal/readers.js"
import { contentKey, decodeEntry, entryFromNew, makeStore, type NewEntry, storedSeq } from "./internal/store.js"

/**
 * Layer options (all optional). `capacity`: lossy queue and `changes` buffer,
 * entries (default 1024); `overflow` (default `"reject"`); `batchSize`: entries
 * per writer transaction (default `min(capacity, 64)`); `identityCache`: bound
 * of the in-memory identity index (default 4096); `maxEntryBytes`: UTF-8 bytes
 * of `payload_json + meta_json` (default unbounded); `redact` (default
 * `Redaction.make()`); `pollInterval`: follower re-check (default 1 second).
 * Numeric options must be positive safe integers (`invalid_event`, `field:
 * "options.<name>"`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlJournalOptions {
  readonly capacity?: number
  readonly overflow?: Journal.OverflowPolicy
  readonly batchSize?: number
  readonly identityCache?: number
  readonly maxEntryBytes?: number
  readonly redact?: Redaction.Redactor
  readonly pollInterval?: Duration.DurationInput
}

const decodeRunId = Schema.decodeUnknownEither(JournalEvent.RunId)
const decodeTypes = Schema.decodeUnknownEither(
  Schema.Array(JournalEvent.EventType).pipe(Schema.minItems(1), Schema.maxItems(64))
)
/**
 * What PostgreSQL's `flows_journal_append` raised, found in the failure's message or its causes:
 * `baton:sequence_conflict` (head or source floor at the end of the range) is `exhausted`,
 * `baton:seq_taken:<seq>` (a row at the seq it allocated) is `seqTaken`; anything else `undefined`.
 */
const appendRaised = (error: unknown, runId: string): Journal.JournalError | undefined => {
  let current: unknown = error
  for (let depth = 0; depth < 4 && typeof current === "object" && current !== null; depth++) {
    const message = String((current as { readonly message?: unknown }).message)
    if (message.includes("baton:sequence_conflict")) return Errors.exhausted(runId)
    const taken = /baton:seq_taken:(\d+)/.exec(message)
    if (taken !== null) return Errors.seqTaken(runId, Number(taken[1]))
    current = (current as { readonly cause?: unknown }).cause
  }
  return undefined
}

const decodeCursor = Schema.decodeUnknownEither(Schema.Int.pipe(Schema.between(-1, Number.MAX_SAFE_INTEGER - 1)))
const decodeSeq = Schema.decodeUnknownEither(JournalEvent.Seq)
const decodeLimit = Schema.decodeUnknownEither(Schema.Int.pipe(Schema.between(1, Journal.maxEntriesLimit)))

/**
 * Build the journal in the current scope (closing it flushes queued lossy
 * entries, then every operation fails `journal_closed`). Reads nothing from
 * the database.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: SqlJournalOptions = {}
): Effect.Effect<Journal.Service, Journal.JournalError, Consensus | DurableWriter.DurableWriter | SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const resolved = yield* resolve(options)
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter
    const consensus = yield* Consensus
    const store = makeStore(sql)
    const checkpoints = makeCheckpointStore(sql)
    const cache = makeIdentityCache(resolved.identityCache)
    const readers = makeReaders()
    const changes = yield* PubSub.sliding<JournalEvent.Entry>(resolved.capacity)
    let closing = false
    let closed = false

    const admission = { redactor: resolved.redact, maxEntryBytes: resolved.maxEntryBytes }
    const now = Clock.currentTimeMillis
    const ifOpen = (operation: string) =>
      Effect.suspend(() => closing || closed ? Effect.fail(Errors.closed(operation)) : Effect.void)
    const sink = (operation: string) => (error: unknown) =>
      Errors.sinkFailed(`Journal.${operation}: the write transaction failed`, error)
    const readFailure = (operation: string) => (error: SqlError) => Errors.readFailed(operation, error)

    const publish = (committed: ReadonlyArray<{ readonly entry: NewEntry; readonly contentKey: string }>) =>
      Effect.gen(function*() {
        for (const { contentKey: key, entry } of committed) {
          cache.commit(entry.eventId, entry.seq, key)
          yield* PubSub.publish(changes, entryFromNew(entry))
          readers.notify(entry.runId)
        }
      })

    const lossy = makeLossy({
      capacity: resolved.capacity,
      overflow: resolved.overflow,
      batchSize: resolved.batchSize,
      store,
      writer,
      cache,
      publish,
      failFollowers: readers.failAll,
      overflowError: () =>
        new Journal.JournalError({
          code: "queue_overflow",
          message: `the lossy queue is full (capacity ${resolved.capacity}, overflow "reject")`
        })
    })

    // Owner and run id were validated on admission, so invalid_input cannot name a caller field here.
    const fence = (runId: string, owner: OwnerId) =>
      consensus.guard(runId, owner).pipe(
        Effect.mapError((error: ConsensusError) =>
          error.code === "fence_lost"
            ? Errors.fenceLost(runId, error)
            : error.code === "invalid_input"
            ? Errors.invalid("owner", error.message)
            : Errors.sinkFailed("the Consensus strategy failed to check the fence", error)
        )
      )

    // A companion id takes no key of its own (Companion.append keys the run it is about).
    const keyOf = (runId: string) => JournalEvent.isCompanionRunId(runId) ? {} : { key: runId }

    /**
     * The fast path's write: the fenced statement (PostgreSQL: one statement, so it goes out as a write of its
     * own — autocommit when outermost, joined without a savepoint inside a transaction; SQLite: with the head's
     * move, as a nested write). A missing fence and a taken seq wrote nothing and leave as outcomes.
     */
    const appendBehindFence = (admitted: Admitted, fenceQuery: Statement.Fragment) => {
      const { runId, sourceId } = admitted
      const body = Effect.gen(function*() {
        const prefix = JournalEvent.makeEventId(runId, sourceId, 0).slice(0, -1)
        const sourceFloor = Math.max(cache.floor(runId, sourceId) ?? 0, cache.hint(runId, sourceId))
        const result = yield* store.appendFenced(fenceQuery, admitted, prefix, sourceFloor)
        if (result._tag !== "Appended") return result
        const { seq, sourceSeq } = result
        if (seq >= maxSeq || sourceSeq >= Number.MAX_SAFE_INTEGER) return yield* Effect.fail(Errors.exhausted(runId))
        cache.raiseFloor(runId, sourceId, sourceSeq + 1, false)
        const entry: NewEntry = {
          runId,
          seq,
          eventId: JournalEvent.makeEventId(runId, sourceId, sourceSeq),
          sourceId,
          sourceSeq,
          emittedAtMs: admitted.emittedAtMs,
          eventType: admitted.eventType,
          payloadJson: admitted.payloadJson,
          metaJson: admitted.metaJson
        }
        const key = contentKey(admitted.eventType, admitted.payloadJson, admitted.metaJson)
        // Outside a managed transaction (PostgreSQL autocommit) the statement has committed already.
        const update = Effect.zipRight(Effect.sync(() => cache.noteHead(runId, seq + 1)), publish([{ entry, contentKey: key }]))
        if (!(yield* DurableWriter.afterCommit(update, sql)) && !(yield* DurableWriter.isInTransaction)) yield* update
        return result
      })
      return store.pg ? writer.statement(body, { key: runId }) : writer.write(body, { key: runId })
    }

    const emitDurableWith = (operation: string, input: JournalEvent.Input, owner: OwnerId | undefined) =>
      Effect.gen(function*() {
        yield* ifOpen(operation)
        const admitted = yield* admit(input, admission, yield* now)
        if (owner !== undefined) yield* admitOwner(owner)
        // A fenced entry whose source_seq the store allocates, under a strategy whose fence is a row of this
        // database: the fence, the allocation and the append are one statement (SQLite adds the head's move).
        const fenceRow = consensus.fenceRow
        if (
          owner !== undefined && admitted.sourceSeq === undefined && fenceRow !== undefined && fenceRow.client === sql &&
          !JournalEvent.isCompanionRunId(admitted.runId)
        ) {
          const outcome = yield* appendBehindFence(admitted, fenceRow.query(admitted.runId, owner)).pipe(
            Effect.catchTag("@baton/database/DatabaseError", (error) =>
              Effect.fail(appendRaised(error, admitted.runId) ?? sink(operation)(error)))
          )
          switch (outcome._tag) {
            case "NoFence":
              // The losing path asks the strategy itself, so the error is the one `guard` names.
              yield* fence(admitted.runId, owner)
              return yield* Effect.fail(Errors.fenceLost(admitted.runId))
            case "SeqTaken":
              return yield* Effect.fail(Errors.seqTaken(admitted.runId, outcome.seq))
            case "Appended": {
              const receipt: Journal.DurableReceipt = {
                _tag: "Accepted",
                sourceSeq: outcome.sourceSeq as JournalEvent.SourceSeq,
                seq: outcome.seq as JournalEvent.Seq
              }
              return receipt
            }
          }
        }
        const body = Effect.gen(function*() {
          if (owner !== undefined) yield* fence(admitted.runId, owner)
          const next = (yield* store.lockHead(admitted.runId)) ?? 0
          const result = yield* appendLocked(store, cache, admitted, next, cache.head(admitted.runId) === next)
          switch (result._tag) {
            case "Refused":
              return yield* Effect.fail(result.error)
            case "Duplicate": {
              const receipt: Journal.DurableReceipt = {
                _tag: "Duplicate",
                sourceSeq: result.sourceSeq as JournalEvent.SourceSeq,
                seq: result.seq as JournalEvent.Seq,
                status: "committed"
              }
              return receipt
            }
            case "Appended": {
              yield* store.setHead(admitted.runId, next + 1)
              yield* DurableWriter.afterCommit(
                Effect.zipRight(Effect.sync(() => cache.noteHead(admitted.runId, next + 1)), publish([result])),
                sql
              )
              const receipt: Journal.DurableReceipt = {
                _tag: "Accepted",
                sourceSeq: result.entry.sourceSeq as JournalEvent.SourceSeq,
                seq: result.entry.seq as JournalEvent.Seq
              }
              return receipt
            }
          }
        })
        // A fact appended by Companion.append is part of its run's write: it joins without a savepoint.
        const fact = JournalEvent.isCompanionRunId(admitted.runId) && (yield* FiberRef.get(FactJoin.joinWithoutSavepoint))
        return yield* writer.write(body, { ...keyOf(admitted.runId), savepoint: !fact }).pipe(
          Effect.catchTag("@baton/database/DatabaseError", (error) => Effect.fail(sink(operation)(error)))
        )
      })

    const emitLossy = (input: JournalEvent.Input): Effect.Effect<Journal.EmitReceipt, Journal.JournalError> =>
      Effect.gen(function*() {
        yield* ifOpen("emitLossy")
        const admitted = yield* admit(input, admission, yield* now)
        const key = contentKey(admitted.eventType, admitted.payloadJson, admitted.metaJson)
        let sourceSeq: number
        if (admitted.sourceSeq !== undefined) {
          sourceSeq = admitted.sourceSeq
          const eventId = JournalEvent.makeEventId(admitted.runId, admitted.sourceId, sourceSeq)
          const cached = cache.get(eventId)
          if (cached !== undefined) {
            if (cached.contentKey !== key && admitted.dedupe !== "identity") return yield* Effect.fail(Errors.conflict(eventId))
            const receipt: Journal.Duplicate = cached.status === "pending"
              ? { _tag: "Duplicate", sourceSeq: sourceSeq as JournalEvent.SourceSeq, status: "pending" }
              : {
                _tag: "Duplicate",
                sourceSeq: sourceSeq as JournalEvent.SourceSeq,
                seq: cached.seq as JournalEvent.Seq,
                status: "committed"
              }
            return receipt
          }
          cache.raiseFloor(admitted.runId, admitted.sourceId, sourceSeq + 1, true)
        } else {
          let floor = cache.floor(admitted.runId, admitted.sourceId)
          if (floor === undefined) {
            const durableNext = yield* store.durableNext(admitted.runId, admitted.sourceId).pipe(
              Effect.catchTag("SqlError", (error) =>
                Effect.fail(Errors.sinkFailed("Journal.emitLossy: reading the producer floor failed", error)))
            )
            floor = Math.max(
              durableNext,
              cache.floor(admitted.runId, admitted.sourceId) ?? 0,
              cache.hint(admitted.runId, admitted.sourceId)
            )
          }
          sourceSeq = floor
          if (sourceSeq >= Number.MAX_SAFE_INTEGER) return yield* Effect.fail(Errors.exhausted(admitted.runId))
          cache.raiseFloor(admitted.runId, admitted.sourceId, sourceSeq + 1, false)
        }
        const eventId = JournalEvent.makeEventId(admitted.runId, admitted.sourceId, sourceSeq)
        return yield* lossy.offer({ ...admitted, sourceSeq }, eventId, key)
      })

    const transact = <A, E, R>(
      effect: Effect.Effect<A, E, R>,
      options?: { readonly key?: string; readonly savepoint?: boolean }
    ) =>
      ifOpen("transact").pipe(
        Effect.zipRight(writer.write(effect, {
          ...(options?.key === undefined ? {} : { key: options.key }),
          ...(options?.savepoint === undefined ? {} : { savepoint: options.savepoint })
        })),
        Effect.catchIf(
          (error): error is DurableWriter.DatabaseError =>
            typeof error === "object" && error !== null &&
            (error as { _tag?: unknown })._tag === "@baton/database/DatabaseError",
          (error) => Effect.fail(Errors.sinkFailed("Journal.transact: the write transaction failed", error))
        )
      ) as Effect.Effect<A, E | Journal.JournalError, R>

    const whenCommitted = (update: Effect.Effect<void>) =>
      Effect.gen(function*() {
        if (!(yield* DurableWriter.isInTransaction)) {
          yield* update
          return true
        }
        return yield* DurableWriter.afterCommit(update, sql)
      })

    const entriesUnchecked = (runId: string, after: number, eventTypes: ReadonlyArray<string> | undefined, limit: number) =>
      Effect.gen(function*() {
        const rows = yield* store.page(runId, after, eventTypes, limit + 1).pipe(Effect.mapError(readFailure("entries")))
        const floor = yield* store.floor(runId).pipe(
          Effect.catchTag("SqlError", (error) => Effect.fail(readFailure("entries")(error)))
        )
        if (floor !== undefined && after < floor - 1) {
          return yield* Effect.fail(
            Errors.withFloor(
              "compacted",
              `run ${JSON.stringify(runId)} is compacted up to ${floor}; resync from latestCheckpoint`,
              floor
            )
          )
        }
        const entries: Array<JournalEvent.Entry> = []
        for (const row of rows.slice(0, limit)) entries.push(yield* decodeEntry(row))
        const page: Journal.EntriesPage = { entries, hasMore: rows.length > limit }
        return page
      })

    const entries = (options: Journal.EntriesOptions) =>
      Effect.gen(function*() {
        yield* ifOpen("entries")
        if (typeof options !== "object" || options === null) return yield* Effect.fail(Errors.invalid("options", "must be an object"))
        const runId = yield* field(decodeRunId, options.runId, "options.runId")
        const after = options.after === undefined ? -1 : yield* field(decodeCursor, options.after, "options.after")
        const limit = yield* field(decodeLimit, options.limit, "options.limit")
        const eventTypes = options.eventTypes === undefined
          ? undefined
          : [...new Set(yield* field(decodeTypes, options.eventTypes, "options.eventTypes"))]
        return yield* entriesUnchecked(runId, after, eventTypes, limit)
      })

    const pageSize = Math.min(resolved.batchSize, Journal.maxEntriesLimit)

    const stream = (options: Journal.StreamOptions): Stream.Stream<JournalEvent.Entry, Journal.JournalError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        yield* ifOpen("stream")
        const runId = yield* field(decodeRunId, options?.runId, "options.runId")
        const start = options.afterSequence === undefined
          ? -1
          : yield* field(decodeSeq, options.afterSequence, "options.afterSequence")
        const reader = yield* readers.register(runId, start)
        const pull = Effect.gen(function*() {
          if (closed) return yield* Effect.fail(Errors.closed("stream"))
          if (yield* Deferred.isDone(reader.failure)) yield* Deferred.await(reader.failure)
          const page = yield* entriesUnchecked(runId, reader.cursor, undefined, pageSize)
          const last = page.entries[page.entries.length - 1]
          if (last !== undefined) {
            reader.cursor = last.seq
            return Chunk.unsafeFromArray(page.entries as Array<JournalEvent.Entry>)
          }
          const wake = Queue.take(reader.wake).pipe(Effect.timeout(resolved.pollInterval), Effect.ignore)
          yield* Effect.raceFirst(Deferred.await(reader.failure), wake)
          return Chunk.empty<JournalEvent.Entry>()
        })
        return Stream.repeatEffectChunk(pull)
      }))

    const fencedWrite = <A>(
      operation: string,
      runId: string,
      owner: OwnerId,
      body: Effect.Effect<A, Journal.JournalError | SqlError>
    ) =>
      Effect.gen(function*() {
        yield* admitOwner(owner)
        return yield* writer.write(
          Effect.gen(function*() {
            yield* fence(runId, owner)
            yield* store.lockHead(runId)
            return yield* body
          }),
          keyOf(runId)
        ).pipe(Effect.catchTag("@baton/database/DatabaseError", (error) => Effect.fail(sink(operation)(error))))
      })

    const checkpoint = (options: Journal.CheckpointOptions, owner: OwnerId) =>
      Effect.gen(function*() {
        yield* ifOpen("checkpoint")
        const runId = yield* field(decodeRunId, options?.runId, "options.runId")
        const seq = yield* field(decodeSeq, options.seq, "options.seq")
        // Executable state is stored verbatim: encoded, never redacted.
        const stateJson = yield* encodeJson(options.state, "options.state", undefined)
        const nowMs = yield* admitClock(yield* now)
        return yield* fencedWrite(
          "checkpoint",
          runId,
          owner,
          Effect.gen(function*() {
            if (!(yield* store.entryExists(runId, seq))) {
              return yield* Effect.fail(
                new Journal.JournalError({
                  code: "checkpoint_invalid",
                  message: `run ${JSON.stringify(runId)} has no entry at seq ${seq}`
                })
              )
            }
            const floor = yield* store.floor(runId)
            if (floor !== undefined && seq <= floor) {
              return yield* Effect.fail(
                Errors.withFloor("checkpoint_invalid", `seq ${seq} is at or below the compaction floor ${floor}`, floor)
              )
            }
            yield* checkpoints.upsert(runId, seq, stateJson, nowMs)
            const stored: Journal.Checkpoint = {
              runId,
              seq,
              state: JSON.parse(stateJson) as unknown,
              createdAtMs: nowMs,
              compactedAtMs: null
            }
            return stored
          })
        )
      })

    const latestCheckpoint = (runIdInput: string) =>
      Effect.gen(function*() {
        yield* ifOpen("latestCheckpoint")
        const runId = yield* field(decodeRunId, runIdInput, "runId")
        const row = yield* checkpoints.latest(runId).pipe(Effect.mapError(readFailure("latestCheckpoint")))
        if (row === undefined) return Option.none<Journal.Checkpoint>()
        return Option.some(yield* decodeCheckpoint(row))
      })

    const compact = (options: Journal.CompactOptions, owner: OwnerId) =>
      Effect.gen(function*() {
        yield* ifOpen("compact")
        const runId = yield* field(decodeRunId, options?.runId, "options.runId")
        const upTo = options.upTo === undefined ? undefined : yield* field(decodeSeq, options.upTo, "options.upTo")
        const nowMs = yield* admitClock(yield* now)
        return yield* fencedWrite(
          "compact",
          runId,
          owner,
          Effect.gen(function*() {
            const row = upTo === undefined ? yield* checkpoints.latest(runId) : yield* checkpoints.at(runId, upTo)
            if (row === undefined) {
              return yield* Effect.fail(
                new Journal.JournalError({
                  code: "checkpoint_invalid",
                  message: upTo === undefined
                    ? `run ${JSON.stringify(runId)} has no checkpoint to compact to`
                    : `run ${JSON.stringify(runId)} has no checkpoint at seq ${upTo}`
                })
              )
            }
            const cp = yield* decodeCheckpoint(row)
            const result = (deleted: number): Journal.Compacted => ({ runId, checkpointSeq: cp.seq, deleted })
            if (cp.compactedAtMs !== null) return result(0)
            if (readers.behind(runId, cp.seq)) {
              return yield* Effect.fail(
                Errors.withFloor(
                  "reader_behind",
                  `a stream of run ${JSON.stringify(runId)} still needs entries below ${cp.seq}`,
                  cp.seq
                )
              )
            }
            return result(yield* checkpoints.compactBelow(runId, cp.seq, nowMs))
          })
        )
      })

    /** The committed rows of a prepared append, checked and published once the enclosing write commits. */
    const publishAppended = (admitted: ReadonlyArray<Admitted>, seq: number, sourceSeq: number) =>
      Effect.gen(function*() {
        const first = admitted[0]!
        const committed = admitted.map((item, i) => {
          const entry: NewEntry = {
            runId: item.runId,
            seq: seq + i,
            eventId: JournalEvent.makeEventId(item.runId, item.sourceId, sourceSeq + i),
            sourceId: item.sourceId,
            sourceSeq: sourceSeq + i,
            emittedAtMs: item.emittedAtMs,
            eventType: item.eventType,
            payloadJson: item.payloadJson,
            metaJson: item.metaJson
          }
          return { entry, contentKey: contentKey(item.eventType, item.payloadJson, item.metaJson) }
        })
        cache.raiseFloor(first.runId, first.sourceId, sourceSeq + admitted.length, false)
        yield* whenCommitted(publish(committed))
      })

    const prepareAppend = (
      inputs: ReadonlyArray<JournalEvent.Input>
    ): Effect.Effect<Journal.PreparedAppend, Journal.JournalError> =>
      Effect.gen(function*() {
        yield* ifOpen("prepareAppend")
        const at = yield* now
        const admitted = yield* Effect.forEach(inputs, (input) => admit(input, admission, at))
        const first = admitted[0]
        if (first === undefined) return yield* Effect.fail(Errors.invalid("inputs", "must hold at least one entry"))
        for (const item of admitted) {
          if (item.runId !== first.runId || item.sourceId !== first.sourceId) {
            return yield* Effect.fail(Errors.invalid("inputs", "must share one runId and one sourceId"))
          }
          if (item.sourceSeq !== undefined) {
            return yield* Effect.fail(Errors.invalid("inputs.sourceSeq", "must be absent (the store allocates it)"))
          }
        }
        const prefix = JournalEvent.makeEventId(first.runId, first.sourceId, 0).slice(0, -1)
        const expression = sql`flows_journal_append(${first.runId}, ${first.sourceId}, ${prefix}, ${first.emittedAtMs},
          ${admitted.map((a) => a.eventType)}::text[], ${admitted.map((a) => a.payloadJson)}::text[],
          ${admitted.map((a) => a.metaJson)}::text[])`
        const appended = (value: unknown) =>
          Effect.gen(function*() {
            const pair = Array.isArray(value) ? value : []
            const seq = yield* storedSeq(pair[0], "journal head", first.runId, "next_seq")
            const sourceSeq = yield* storedSeq(pair[1], "journal row", first.runId, "source_seq")
            yield* publishAppended(admitted, seq, sourceSeq)
          })
        const append = store.pg
          ? Effect.flatMap(sql<{ readonly appended: unknown }>`SELECT ${expression} AS appended`, (rows) =>
            appended(rows[0]?.appended))
          : Effect.flatMap(store.appendAll(first.runId, first.sourceId, prefix, admitted), ({ seq, sourceSeq }) =>
            publishAppended(admitted, seq, sourceSeq))
        return {
          expression,
          appended,
          append: append.pipe(Effect.catchTag("SqlError", (error) => Effect.fail(sink("prepareAppend")(error))))
        }
      })

    const service = Journal.make({
      emitDurable: (input, owner) => emitDurableWith("emitDurable", input, owner),
      emitDurableUnfenced: (input) => emitDurableWith("emitDurableUnfenced", input, undefined),
      emitLossy,
      flush: ifOpen("flush").pipe(Effect.zipRight(lossy.flush)),
      transact,
      whenCommitted,
      entries,
      stream,
      changes: PubSub.subscribe(changes),
      checkpoint,
      latestCheckpoint,
      compact,
      prepareAppend
    })

    yield* Effect.forkScoped(lossy.run)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        closing = true
        yield* Effect.ignore(lossy.flush)
        closed = true
        const error = Errors.closed("close")
        yield* lossy.abandon(error)
        yield* readers.failAll(error)
        yield* PubSub.shutdown(changes)
      })
    )
    return service
  })

/**
 * The journal with `Consensus` taken from context: fenced writes check that
 * strategy inside their own write. Across processes give it the run store's
 * `SqlConsensus` (leases on the run row), the build the run store uses; with
 * `Consensus.layerLocal` (one process) provide one build to both this layer and
 * the run store.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (
  options: SqlJournalOptions = {}
): Layer.Layer<Journal.Journal, Journal.JournalError, Consensus | DurableWriter.DurableWriter | SqlClient.SqlClient> =>
  Layer.scoped(Journal.Journal, make(options))
