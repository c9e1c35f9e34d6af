/**
 * Journal event models: identifiers, sequence numbers, the emit input, the
 * stored entry, companion stream ids and the event types control reads.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { Schema } from "effect"
import { textProblem } from "./internal/text.js"

/**
 * Longest identifier, in UTF-16 code units.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxIdentifierLength = 1024

/**
 * An identifier: 1..1024 UTF-16 code units, no unpaired surrogate, no U+0000.
 * SQLite binds a lone surrogate as U+FFFD (two ids would share a key) and
 * `length()` stops at NUL, so both are refused.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Identifier: Schema.Schema<string> = Schema.String.pipe(
  Schema.filter((text) => {
    if (text.length === 0) return "must not be empty"
    if (text.length > maxIdentifierLength) return `must be at most ${maxIdentifierLength} characters`
    const problem = textProblem(text)
    return problem === undefined ? true : `must not contain ${problem === "NUL" ? "U+0000" : "an unpaired surrogate"}`
  }, { identifier: "Identifier" })
)

/**
 * A run id (or a companion stream id).
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunId = Identifier.pipe(Schema.brand("@baton/journal/RunId"))
/**
 * @since 0.1.0
 * @category models
 */
export type RunId = typeof RunId.Type

/**
 * A producer id; identity is `(runId, sourceId, sourceSeq)`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SourceId = Identifier.pipe(Schema.brand("@baton/journal/SourceId"))
/**
 * @since 0.1.0
 * @category models
 */
export type SourceId = typeof SourceId.Type

/**
 * An event type: any identifier.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EventType = Identifier
/**
 * @since 0.1.0
 * @category models
 */
export type EventType = string

const sequenceNumber = Schema.Int.pipe(
  Schema.greaterThanOrEqualTo(0),
  Schema.lessThan(Number.MAX_SAFE_INTEGER)
)

/**
 * A run's canonical position: an integer `0 <= n < Number.MAX_SAFE_INTEGER`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Seq = sequenceNumber.pipe(Schema.brand("@baton/journal/Seq"))
/**
 * @since 0.1.0
 * @category models
 */
export type Seq = typeof Seq.Type

/**
 * A producer-local sequence number, same range as {@link Seq}.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SourceSeq = sequenceNumber.pipe(Schema.brand("@baton/journal/SourceSeq"))
/**
 * @since 0.1.0
 * @category models
 */
export type SourceSeq = typeof SourceSeq.Type

/**
 * How a re-emitted identity is compared: `"content"` (default) answers
 * `idempotency_conflict` on changed content, `"identity"` keeps the first row.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Dedupe = Schema.Literal("content", "identity")
/**
 * @since 0.1.0
 * @category models
 */
export type Dedupe = typeof Dedupe.Type

/**
 * What a producer emits. `sourceSeq` omitted: the journal allocates it;
 * `dedupe` defaults to `"content"`; `payload` is JSON (`undefined` refused);
 * `meta` defaults to `null`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Input = Schema.Struct({
  runId: RunId,
  sourceId: SourceId,
  sourceSeq: Schema.optional(SourceSeq),
  dedupe: Schema.optional(Dedupe),
  eventType: EventType,
  payload: Schema.Unknown,
  meta: Schema.optional(Schema.Unknown)
})

/**
 * The emit input as callers write it (plain strings and numbers; validated on
 * admission, so branded values are accepted too).
 *
 * @since 0.1.0
 * @category models
 */
export interface Input {
  readonly runId: string
  readonly sourceId: string
  readonly sourceSeq?: number | undefined
  readonly dedupe?: Dedupe | undefined
  readonly eventType: string
  readonly payload: unknown
  readonly meta?: unknown
}

/**
 * A committed journal entry. `emittedAtMs`: `Clock` epoch milliseconds at emit
 * (integer >= 0); `payload`/`meta`: the stored (redacted, canonical) JSON decoded.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Entry = Schema.Struct({
  runId: RunId,
  seq: Seq,
  eventId: Schema.String,
  sourceId: SourceId,
  sourceSeq: SourceSeq,
  emittedAtMs: Schema.Int.pipe(Schema.nonNegative()),
  eventType: EventType,
  payload: Schema.Unknown,
  meta: Schema.Unknown
})
/**
 * @since 0.1.0
 * @category models
 */
export type Entry = typeof Entry.Type

/**
 * The event id of an identity: deterministic and injective
 * (`ev:<len>:<runId>:<len>:<sourceId>:<sourceSeq>`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeEventId = (runId: string, sourceId: string, sourceSeq: number): string =>
  `ev:${runId.length}:${runId}:${sourceId.length}:${sourceId}:${sourceSeq}`

/**
 * Prefix of every companion stream id.
 *
 * @since 0.1.0
 * @category constants
 */
export const companionPrefix = "flows.companion/"

const streamName = /^[a-z0-9][a-z0-9.-]{0,63}$/

/**
 * Whether `stream` is a valid companion stream name (`^[a-z0-9][a-z0-9.-]{0,63}$`).
 *
 * @since 0.1.0
 * @category guards
 */
export const isCompanionStreamName = (stream: string): boolean => streamName.test(stream)

/**
 * The companion stream id of `runId`:
 * `flows.companion/<stream>/<hex SHA-256 of the UTF-8 run id>` (at most 1024 units).
 * Throws (a defect) when `stream` is not a valid stream name.
 *
 * @since 0.1.0
 * @category constructors
 */
export const companionRunId = (stream: string, runId: string): RunId => {
  if (!streamName.test(stream)) {
    throw new TypeError(`invalid companion stream name ${JSON.stringify(stream)}`)
  }
  const digest = createHash("sha256").update(runId, "utf8").digest("hex")
  return `${companionPrefix}${stream}/${digest}` as RunId
}

/**
 * Whether `runId` names a companion stream (run-store refuses such run ids).
 *
 * @since 0.1.0
 * @category guards
 */
export const isCompanionRunId = (runId: string): boolean => runId.startsWith(companionPrefix)

/**
 * The event types control reads from a run's own stream.
 *
 * @since 0.1.0
 * @category constants
 */
export const EventTypes = {
  forkCreated: "flows.time-travel.fork-created",
  cancelRequested: "control.run.cancel-requested",
  engineInterrupted: "flows.engine.interrupted"
} as const

/**
 * Payload of `flows.time-travel.fork-created`, on the forked child's stream.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ForkCreatedPayload = Schema.Struct({
  parentRunId: Schema.String,
  forkJournalOffset: Schema.Int.pipe(Schema.nonNegative()),
  childRunId: Schema.String
})

/**
 * Payload of `control.run.cancel-requested` (an attributed cancel request).
 * `principal` is decoded by control with its own schema.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CancelRequestedPayload = Schema.Struct({
  runId: Schema.optional(Schema.String),
  source: Schema.optional(Schema.String),
  principal: Schema.optional(Schema.Unknown),
  reason: Schema.optional(Schema.String)
})

/**
 * Payload of `flows.engine.interrupted`; control counts it only when
 * `outcome === "cancelled"`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EngineInterruptedPayload = Schema.Struct({
  outcome: Schema.optional(Schema.String),
  interruptedAtMs: Schema.optional(Schema.Int.pipe(Schema.nonNegative()))
})
