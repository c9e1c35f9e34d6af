/**
 * The admission pipeline, shared by every channel: decode the input, redact
 * payload and meta, encode canonically, check the size bound, admit the clock.
 * A refused admission writes nothing and consumes no seq.
 *
 * @internal
 */
import { Either, type ParseResult, Schema } from "effect"
import { JournalError } from "../Journal.js"
import * as JournalEvent from "../JournalEvent.js"
import { OwnerId } from "../OwnerId.js"
import * as Redaction from "../Redaction.js"
import { encode } from "./canonical.js"
import { invalid } from "./errors.js"
import { decodeField } from "./parse.js"
import { plainProblem } from "./plain.js"
import { maxStoredInt } from "./text.js"

/** An admitted emit: validated ids, canonical JSON, content key for identity checks. */
export interface Admitted {
  readonly runId: string
  readonly sourceId: string
  readonly sourceSeq: number | undefined
  readonly dedupe: JournalEvent.Dedupe
  readonly eventType: string
  readonly payloadJson: string
  readonly metaJson: string
  readonly emittedAtMs: number
}

const decodeInput = Schema.decodeUnknownEither(JournalEvent.Input)
const decodeOwner = Schema.decodeUnknownEither(OwnerId)

/** Decode an object argument; a non-object is refused as a whole. */
const decodeObject = <A>(
  decode: (value: unknown, options?: { readonly errors: "first" }) => Either.Either<A, ParseResult.ParseError>,
  value: unknown,
  prefix: string
): Either.Either<A, JournalError> =>
  typeof value !== "object" || value === null
    ? Either.left(invalid(prefix, "must be an object"))
    : decodeField(decode, value, prefix)

export const admitOwner = (owner: unknown): Either.Either<unknown, JournalError> =>
  decodeObject(decodeOwner, owner, "owner")

/** A key as it may appear in an error message: hidden when the redactor would change it. */
const shownKey = (redactor: Redaction.Redactor | undefined) => (key: string): string => {
  if (redactor === undefined) return key
  try {
    return redactor(key) === key ? key : Redaction.placeholder
  } catch {
    return Redaction.placeholder
  }
}

/**
 * Check, redact, then encode one JSON member; `field` names it on refusal and
 * the message names the path. The value must already be plain JSON
 * (`plainProblem`), so redaction never runs caller code; a redactor failure is
 * reported without echoing its text (it could quote the payload).
 */
export const encodeJson = (
  value: unknown,
  field: string,
  redactor: Redaction.Redactor | undefined
): Either.Either<string, JournalError> => {
  const problem = plainProblem(value, field, shownKey(redactor))
  if (problem !== undefined) return Either.left(new JournalError({ code: "invalid_event", field, message: problem }))
  let redacted: unknown
  try {
    redacted = redactor === undefined ? value : redactor(value)
  } catch {
    return Either.left(invalid(field, "the redactor failed on this value"))
  }
  return Either.mapLeft(encode(redacted), (reason) => invalid(field, reason))
}

/**
 * A `Clock` reading as a stored time: floored to whole milliseconds and within
 * what the time columns hold (`0..Number.MAX_SAFE_INTEGER`, their CHECK
 * constraints). Checked before anything is queued or written, so a reading the
 * store would refuse is `invalid_event` on every channel instead of a failed
 * or lost write. The message never quotes the reading.
 */
export const admitClock = (nowMs: number): Either.Either<number, JournalError> => {
  const ms = Math.floor(nowMs)
  return Number.isSafeInteger(ms) && ms >= 0 && ms <= maxStoredInt
    ? Either.right(ms)
    : Either.left(invalid("clock", `the Clock reading must be epoch milliseconds in 0..${maxStoredInt}`))
}

export interface AdmissionOptions {
  readonly redactor: Redaction.Redactor
  readonly maxEntryBytes: number | undefined
}

export const admit = (
  input: JournalEvent.Input,
  options: AdmissionOptions,
  nowMs: number
): Either.Either<Admitted, JournalError> =>
  Either.gen(function*() {
    const decoded = yield* decodeObject(decodeInput, input, "input")
    if (decoded.payload === undefined) {
      return yield* Either.left(invalid("input.payload", "must be a JSON value, not undefined"))
    }
    const payloadJson = yield* encodeJson(decoded.payload, "input.payload", options.redactor)
    const metaJson = yield* encodeJson(decoded.meta ?? null, "input.meta", options.redactor)
    if (options.maxEntryBytes !== undefined) {
      const bytes = Buffer.byteLength(payloadJson, "utf8") + Buffer.byteLength(metaJson, "utf8")
      if (bytes > options.maxEntryBytes) {
        return yield* Either.left(
          invalid("input.payload", `entry is ${bytes} bytes, above maxEntryBytes ${options.maxEntryBytes}`)
        )
      }
    }
    const emittedAtMs = yield* admitClock(nowMs)
    return {
      runId: decoded.runId,
      sourceId: decoded.sourceId,
      sourceSeq: decoded.sourceSeq,
      dedupe: decoded.dedupe ?? "content",
      eventType: decoded.eventType,
      payloadJson,
      metaJson,
      emittedAtMs
    }
  })
