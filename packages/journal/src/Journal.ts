/**
 * The journal service: an append-only, per-run ordered history with a fenced
 * durable channel, an unfenced durable channel, a lossy telemetry channel,
 * paged reads, a follower stream, checkpoints and compaction.
 *
 * @since 0.1.0
 */
import type { Fragment } from "@effect/sql/Statement"
import type * as Scope from "effect/Scope"
import { Context, Effect, Layer, Option, Queue, Schema, Stream } from "effect"
import type { Entry, Input, RunId, Seq, SourceSeq } from "./JournalEvent.js"
import { Seq as SeqSchema } from "./JournalEvent.js"
import type { OwnerId } from "./OwnerId.js"

/**
 * The emit took effect. `seq` is always set on durable receipts and never on
 * lossy ones (the canonical seq is assigned at commit); `evicted: 1` when a
 * `drop-oldest` queue discarded its oldest entry to make room.
 *
 * @since 0.1.0
 * @category receipts
 */
export interface Accepted {
  readonly _tag: "Accepted"
  readonly sourceSeq: SourceSeq
  readonly seq?: Seq
  readonly evicted?: number
}

/**
 * The identity was already emitted with the same content (or under `dedupe:
 * "identity"`): nothing new was written. `seq` is set once committed.
 *
 * @since 0.1.0
 * @category receipts
 */
export interface Duplicate {
  readonly _tag: "Duplicate"
  readonly sourceSeq: SourceSeq
  readonly seq?: Seq
  readonly status: "pending" | "committed"
}

/**
 * A lossy emit discarded under `overflow: "drop-newest"` (queue full).
 *
 * @since 0.1.0
 * @category receipts
 */
export interface Dropped {
  readonly _tag: "Dropped"
  readonly sourceSeq: SourceSeq
  readonly policy: "drop-newest"
}

/**
 * Receipt of a lossy emit.
 *
 * @since 0.1.0
 * @category receipts
 */
export type EmitReceipt = Accepted | Duplicate | Dropped

/**
 * Receipt of a durable emit: always committed, always with `seq`.
 *
 * @since 0.1.0
 * @category receipts
 */
export type DurableReceipt =
  | (Accepted & { readonly seq: Seq })
  | (Duplicate & { readonly seq: Seq; readonly status: "committed" })

/**
 * What a full lossy queue does with the next emit.
 *
 * @since 0.1.0
 * @category schemas
 */
export const OverflowPolicy = Schema.Literal("reject", "drop-newest", "drop-oldest")
/**
 * @since 0.1.0
 * @category models
 */
export type OverflowPolicy = typeof OverflowPolicy.Type

/**
 * Largest `entries` page.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxEntriesLimit = 10_000

/**
 * One page of a run: entries with `seq > after` (default −1), optionally only
 * the given event types (1..64), at most `limit` (1..10 000).
 *
 * @since 0.1.0
 * @category models
 */
export interface EntriesOptions {
  readonly runId: string
  readonly after?: number | undefined
  readonly eventTypes?: ReadonlyArray<string> | undefined
  readonly limit: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface EntriesPage {
  readonly entries: ReadonlyArray<Entry>
  readonly hasMore: boolean
}

/**
 * Follow a run from `afterSequence` (exclusive; default from the start).
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamOptions {
  readonly runId: string
  readonly afterSequence?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface CheckpointOptions {
  readonly runId: string
  readonly seq: number
  readonly state: unknown
}

/**
 * A stored checkpoint; `state` is verbatim (not redacted). Times are epoch ms.
 *
 * @since 0.1.0
 * @category models
 */
export interface Checkpoint {
  readonly runId: RunId
  readonly seq: Seq
  readonly state: unknown
  readonly createdAtMs: number
  readonly compactedAtMs: number | null
}

/**
 * Compact up to the checkpoint at `upTo` (default: the latest checkpoint).
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactOptions {
  readonly runId: string
  readonly upTo?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Compacted {
  readonly runId: RunId
  readonly checkpointSeq: Seq
  readonly deleted: number
}

/**
 * Stable error codes. Among them: `invalid_event` for refused input (a `Clock`
 * reading outside `0..Number.MAX_SAFE_INTEGER` ms included, `field: "clock"`);
 * `sequence_conflict` when a run's sequence space is exhausted or a stored row
 * already holds the seq its head allocated (the head disagrees with the rows);
 * `sink_failed` for a failed write, a lost lossy batch or a stopped lossy
 * writer; `decode_failed` for a stored row outside what the types promise (a
 * `seq` or `source_seq` of `Number.MAX_SAFE_INTEGER` included).
 *
 * @since 0.1.0
 * @category errors
 */
export const JournalErrorCode = Schema.Literal(
  "invalid_event",
  "idempotency_conflict",
  "sequence_conflict",
  "fence_lost",
  "queue_overflow",
  "journal_closed",
  "sink_failed",
  "read_failed",
  "decode_failed",
  "checkpoint_invalid",
  "reader_behind",
  "compacted",
  "unknown"
)
/**
 * @since 0.1.0
 * @category errors
 */
export type JournalErrorCode = typeof JournalErrorCode.Type

/**
 * Every journal failure. `field` names the offending input (`input.runId`,
 * `owner.pid`, `options.limit`); `checkpointSeq` accompanies `compacted`,
 * `reader_behind` and `checkpoint_invalid`; `cause` keeps a `DatabaseError`.
 *
 * @since 0.1.0
 * @category errors
 */
export class JournalError extends Schema.TaggedError<JournalError>()("@baton/journal/JournalError", {
  code: JournalErrorCode,
  message: Schema.String,
  field: Schema.optional(Schema.String),
  checkpointSeq: Schema.optional(SeqSchema),
  cause: Schema.optional(Schema.Unknown)
}) {}

/**
 * Entries made ready to append inside another store's write. `append` appends
 * them in the enclosing write (SQLite: two statements for any number of
 * entries). On PostgreSQL `expression` is a select-list expression that
 * appends them when the caller's own statement evaluates it (once, or not at
 * all when that statement's write did not take effect), answering their
 * position; pass that value to `appended`. Either way the entries are
 * published once the enclosing write commits (at once in autocommit). A
 * contract between Baton's stores.
 *
 * @since 0.2.0
 * @category contract
 */
export interface PreparedAppend {
  readonly expression: Fragment
  readonly appended: (value: unknown) => Effect.Effect<void, JournalError>
  readonly append: Effect.Effect<void, JournalError>
}

/**
 * The journal operations (docs/design/journal.md).
 *
 * - `emitDurable` (fenced by `owner`) / `emitDurableUnfenced`: commit before
 *   returning; `Accepted { seq }` or `Duplicate { seq, status: "committed" }`.
 * - `emitLossy`: queue for the writer fiber; `Accepted` (no seq), `Duplicate`
 *   or `Dropped`; `queue_overflow` under `reject`; `sink_failed` once the
 *   writer fiber has stopped (a defect killed it).
 * - `flush`: wait until every lossy entry queued before it is committed or lost.
 *   Fails with an unreported loss, or `sink_failed` for good once the writer
 *   has stopped. Never call it inside `transact` or an open write transaction.
 * - `transact`: `DurableWriter.write(effect, options)`; nested journal writes
 *   join it; publication follows the outermost commit. `savepoint: false` joins
 *   an enclosing write without a savepoint (`DurableWriter.WriteOptions`).
 * - `whenCommitted`: run `update` after the outermost commit (`true`), now when
 *   no transaction is open (`true`), never in a raw transaction (`false`).
 * - `entries`, `stream`, `changes`: reads; `checkpoint`, `latestCheckpoint`,
 *   `compact`: replay support (fenced writes).
 * - `prepareAppend`: unfenced entries of one run and source, admitted as
 *   `emitDurableUnfenced` admits them, appended by a statement of the caller's
 *   (`PreparedAppend`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly emitDurable: (input: Input, owner: OwnerId) => Effect.Effect<DurableReceipt, JournalError>
  readonly emitDurableUnfenced: (input: Input) => Effect.Effect<DurableReceipt, JournalError>
  readonly emitLossy: (input: Input) => Effect.Effect<EmitReceipt, JournalError>
  readonly flush: Effect.Effect<void, JournalError>
  readonly transact: <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    options?: { readonly key?: string; readonly savepoint?: boolean }
  ) => Effect.Effect<A, E | JournalError, R>
  readonly whenCommitted: (update: Effect.Effect<void>) => Effect.Effect<boolean>
  readonly entries: (options: EntriesOptions) => Effect.Effect<EntriesPage, JournalError>
  readonly stream: (options: StreamOptions) => Stream.Stream<Entry, JournalError>
  readonly changes: Effect.Effect<Queue.Dequeue<Entry>, never, Scope.Scope>
  readonly checkpoint: (options: CheckpointOptions, owner: OwnerId) => Effect.Effect<Checkpoint, JournalError>
  readonly latestCheckpoint: (runId: string) => Effect.Effect<Option.Option<Checkpoint>, JournalError>
  readonly compact: (options: CompactOptions, owner: OwnerId) => Effect.Effect<Compacted, JournalError>
  readonly prepareAppend: (inputs: ReadonlyArray<Input>) => Effect.Effect<PreparedAppend, JournalError>
}

/**
 * @since 0.1.0
 * @category services
 */
export class Journal extends Context.Tag("@baton/journal/Journal")<Journal, Service>() {}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (service: Service): Service => service

const closed = (operation: string) =>
  new JournalError({ code: "journal_closed", message: `Journal.${operation}: the journal is a no-op stub` })

/**
 * A stub: everything fails `journal_closed` except `transact` (runs the
 * effect), `whenCommitted` (runs the update, `true`) and `changes` (an empty
 * subscription).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeNoop = (overrides: Partial<Service> = {}): Service =>
  make({
    emitDurable: () => Effect.fail(closed("emitDurable")),
    emitDurableUnfenced: () => Effect.fail(closed("emitDurableUnfenced")),
    emitLossy: () => Effect.fail(closed("emitLossy")),
    flush: Effect.fail(closed("flush")),
    transact: (effect) => effect,
    whenCommitted: (update) => Effect.as(update, true),
    entries: () => Effect.fail(closed("entries")),
    stream: () => Stream.fail(closed("stream")),
    changes: Effect.acquireRelease(Queue.unbounded<Entry>(), Queue.shutdown),
    checkpoint: () => Effect.fail(closed("checkpoint")),
    latestCheckpoint: () => Effect.fail(closed("latestCheckpoint")),
    compact: () => Effect.fail(closed("compact")),
    prepareAppend: () => Effect.fail(closed("prepareAppend")),
    ...overrides
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layerNoop = (overrides: Partial<Service> = {}): Layer.Layer<Journal> =>
  Layer.succeed(Journal, makeNoop(overrides))
