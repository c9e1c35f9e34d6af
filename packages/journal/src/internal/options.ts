/**
 * `SqlJournalOptions` validation: every numeric option a positive safe integer;
 * a bad option fails construction with `invalid_event`, `field: "options.<name>"`.
 *
 * @internal
 */
import { Duration, Effect, Option } from "effect"
import type { JournalError, OverflowPolicy } from "../Journal.js"
import * as Redaction from "../Redaction.js"
import { invalid } from "./errors.js"

export interface RawOptions {
  readonly capacity?: number
  readonly overflow?: OverflowPolicy
  readonly batchSize?: number
  readonly identityCache?: number
  readonly maxEntryBytes?: number
  readonly redact?: Redaction.Redactor
  readonly pollInterval?: Duration.DurationInput
}

export interface ResolvedOptions {
  readonly capacity: number
  readonly overflow: OverflowPolicy
  readonly batchSize: number
  readonly identityCache: number
  readonly maxEntryBytes: number | undefined
  readonly redact: Redaction.Redactor
  readonly pollInterval: Duration.Duration
}

const positive = (name: string, value: unknown, fallback: number): Effect.Effect<number, JournalError> =>
  value === undefined
    ? Effect.succeed(fallback)
    : typeof value === "number" && Number.isSafeInteger(value) && value > 0
    ? Effect.succeed(value)
    : Effect.fail(invalid(`options.${name}`, "must be a positive safe integer"))

export const resolve = (options: RawOptions = {}): Effect.Effect<ResolvedOptions, JournalError> =>
  Effect.gen(function*() {
    const capacity = yield* positive("capacity", options.capacity, 1024)
    const batchSize = yield* positive("batchSize", options.batchSize, Math.min(capacity, 64))
    const identityCache = yield* positive("identityCache", options.identityCache, 4096)
    const maxEntryBytes = options.maxEntryBytes === undefined
      ? undefined
      : yield* positive("maxEntryBytes", options.maxEntryBytes, 0)
    const overflow = options.overflow ?? "reject"
    if (overflow !== "reject" && overflow !== "drop-newest" && overflow !== "drop-oldest") {
      return yield* Effect.fail(invalid("options.overflow", "must be \"reject\", \"drop-newest\" or \"drop-oldest\""))
    }
    if (options.redact !== undefined && typeof options.redact !== "function") {
      return yield* Effect.fail(invalid("options.redact", "must be a function"))
    }
    const pollInterval = options.pollInterval === undefined
      ? Option.some(Duration.seconds(1))
      : Duration.decodeUnknown(options.pollInterval)
    if (Option.isNone(pollInterval) || !Duration.greaterThan(pollInterval.value, Duration.zero) ||
      !Duration.isFinite(pollInterval.value)) {
      return yield* Effect.fail(invalid("options.pollInterval", "must be a positive finite duration"))
    }
    return {
      capacity,
      overflow,
      batchSize,
      identityCache,
      maxEntryBytes,
      redact: options.redact ?? Redaction.make(),
      pollInterval: pollInterval.value
    }
  })
