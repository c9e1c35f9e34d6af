/**
 * Admission checks and small helpers of the control runtime.
 */
import { Effect, Schema } from "effect"
import { ClaimLost, EnvelopeMismatch, InvalidInput, PlanDigestMismatch } from "../ControlError.js"
import type { ApprovalTarget, Envelope, Principal, Receipt, RunStatus, SignalPayload, SteerMessage } from "../ControlSchema.js"
import {
  Principal as PrincipalSchema,
  SignalPayload as SignalPayloadSchema,
  SteerMessage as SteerMessageSchema
} from "../ControlSchema.js"
import type { ParkRequest, SignalQuery } from "../ControlRuntime.js"
import { canonical, isDurableText, isDurableTextOfLength, tryCanonical } from "./canonical.js"
import { describeIssue } from "./schemaIssue.js"

/** A page limit in 1..500, else `InvalidInput` naming the rule. */
export const checkLimit = (limit: unknown): Effect.Effect<number, InvalidInput> =>
  typeof limit === "number" && Number.isSafeInteger(limit) && limit >= 1 && limit <= 500
    ? Effect.succeed(limit)
    : Effect.fail(new InvalidInput({ issue: "limit: must be an integer between 1 and 500" }))

/** An optional non-negative safe integer field. */
export const checkOrdinal = (field: string, value: unknown): Effect.Effect<number | undefined, InvalidInput> =>
  value === undefined || (typeof value === "number" && Number.isSafeInteger(value) && value >= 0)
    ? Effect.succeed(value as number | undefined)
    : Effect.fail(new InvalidInput({ issue: `${field}: must be a non-negative safe integer` }))

/** The refusal text for an approval reason. */
export const reasonIssue = "reason: must be 1 to 1000 well-formed characters"

/** An optional decision reason, checked before any write. */
export const checkReason = (reason: unknown): Effect.Effect<string | undefined, InvalidInput> =>
  reason === undefined || isDurableTextOfLength(reason, 1000)
    ? Effect.succeed(reason as string | undefined)
    : Effect.fail(new InvalidInput({ issue: reasonIssue }))

/** A park request: reason 1..64, token 1..1024 durable text, request canonical JSON. */
export const checkPark = (wait: ParkRequest): Effect.Effect<{ readonly request: string | null }, InvalidInput> => {
  if (!isDurableTextOfLength(wait.reason, 64)) {
    return Effect.fail(new InvalidInput({ issue: "reason: must be 1 to 64 well-formed characters" }))
  }
  if (!isDurableTextOfLength(wait.token, 1024)) {
    return Effect.fail(new InvalidInput({ issue: "token: must be 1 to 1024 well-formed characters" }))
  }
  if (wait.request === undefined) return Effect.succeed({ request: null })
  const text = tryCanonical(wait.request, "request")
  return text.ok ? Effect.succeed({ request: text.text }) : Effect.fail(new InvalidInput({ issue: text.issue }))
}

/** A signal query's filters and limit (default 100). */
export const checkSignalQuery = (query: SignalQuery): Effect.Effect<number, InvalidInput> =>
  query.state !== undefined && !["pending", "delivered", "rejected", "terminal"].includes(query.state)
    ? Effect.fail(new InvalidInput({ issue: "state: must be pending, delivered, rejected or terminal" }))
    : checkLimit(query.limit ?? 100)

/** The public status a park writes. */
export const parkStatus = (reason: string): RunStatus => (reason === "approval" ? "waiting-approval" : "parked")

/** Canonical envelope text (envelope equality is equality of canonical strings). */
export const envelopeText = (envelope: Envelope): string => canonical(envelope, "envelope")

/** The token identity of a target: `(tag, runId or '', planId or requestId)`. */
export const identityOf = (target: ApprovalTarget) =>
  target._tag === "Plan"
    ? { tag: "Plan" as const, runId: "", targetId: target.planId }
    : { tag: "Node" as const, runId: target.runId, targetId: target.requestId }

/** Compare a stored target with a submitted one: digest first, then envelope. */
export const checkTarget = (
  tokenId: string,
  stored: ApprovalTarget,
  submitted: ApprovalTarget
): Effect.Effect<void, PlanDigestMismatch | EnvelopeMismatch> =>
  Effect.gen(function*() {
    if (stored.digest !== submitted.digest) {
      return yield* Effect.fail(new PlanDigestMismatch({ planId: tokenId, expected: stored.digest, actual: submitted.digest }))
    }
    const actual = tryCanonical(submitted.envelope, "envelope")
    const expected = envelopeText(stored.envelope)
    const actualText = actual.ok ? actual.text : actual.issue
    if (!actual.ok || expected !== actualText) {
      return yield* Effect.fail(new EnvelopeMismatch({ planId: tokenId, expected, actual: actualText }))
    }
  })

/** A journal identifier: 1..1024 units of durable text. */
export const isIdentifier = (s: unknown): s is string => isDurableTextOfLength(s, 1024)

/** An id argument (`runId`, `commandId`): 1..1024 well-formed characters, else `InvalidInput` naming it. */
export const checkId = (field: string, value: unknown): Effect.Effect<void, InvalidInput> =>
  isIdentifier(value) ? Effect.void : Effect.fail(new InvalidInput({ issue: `${field}: must be 1 to 1024 well-formed characters` }))

/**
 * A value stored as JSON and read back with `schema`: it must have a canonical form both dialects can
 * store (no U+0000 or unpaired surrogate in strings or keys, finite numbers, plain data) and decode,
 * else `InvalidInput` naming the path under `field` (`message.body: string contains U+0000 ...`).
 */
const checkStored = <A, I>(field: string, schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema)
  return (value: unknown): Effect.Effect<void, InvalidInput> => {
    const text = tryCanonical(value, field)
    if (!text.ok) return Effect.fail(new InvalidInput({ issue: text.issue }))
    const decoded = decode(value)
    return decoded._tag === "Right" ? Effect.void : Effect.fail(new InvalidInput({ issue: describeIssue(decoded.left, field) }))
  }
}

/**
 * The rule of a signal's name. `SignalPayload.name` has no bounds of its own; a signal only
 * ever answers a wait, and wait names (the node executor's step-name rule) are 1..200 characters, so a
 * name outside that can never match and is refused at admission instead of queued forever.
 */
export const signalNameRule = "must be 1 to 200 well-formed characters"

/** A signal name: 1..200 UTF-16 units (NUL and lone surrogates are refused by the canonical check first). */
export const SignalName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({
  message: () => ({ message: signalNameRule, override: true })
})

/** A signal as admitted (facade and runtime alike): the stored shape with the name rule. */
export const AdmittedSignal = Schema.Struct({ name: SignalName, payload: SignalPayloadSchema.fields.payload })

const checkSteerMessage = checkStored("message", SteerMessageSchema)
const checkSignalPayload = checkStored("signal", AdmittedSignal)
const checkPrincipal = checkStored("principal", PrincipalSchema)

/** `appendSteer`'s arguments, checked before anything is read or written. */
export const checkSteer = (runId: string, message: SteerMessage): Effect.Effect<void, InvalidInput> =>
  Effect.zipRight(checkId("runId", runId), checkSteerMessage(message))

/** `admitSignal`'s (with a command id) and `deliverSignal`'s arguments, checked before anything is written. */
export const checkSignal = (
  ids: { readonly commandId?: string; readonly runId: string },
  signal: SignalPayload,
  principal?: Principal
): Effect.Effect<void, InvalidInput> =>
  Effect.gen(function*() {
    if ("commandId" in ids) yield* checkId("commandId", ids.commandId)
    yield* checkId("runId", ids.runId)
    yield* checkSignalPayload(signal)
    if (principal !== undefined) yield* checkPrincipal(principal)
  })

/** The refusal of a run cursor that names no row this listing selected (forged, or its run deleted since). */
export const cursorIssue = "cursor: must be a cursor this listing returned (it names no listed run)"

/** The refusal of a plans `after` that names no plan row (plans are never deleted, so it was forged). */
export const planAfterIssue = "after: must be a plan position this listing returned"

/** `ClaimLost` for a run. */
export const claimLost = (runId: string, reason?: string) =>
  new ClaimLost(reason === undefined ? { runId } : { runId, reason })

/** True when `s` is durable text (re-exported for callers that only need the predicate). */
export { isDurableText }

/** The replay answer derived from a recorded receipt (docs/design/control.md). */
export const alreadyApplied = (key: string, receipt: Receipt): Receipt => {
  const receiptId = receipt._tag === "Accepted" || receipt._tag === "AlreadyApplied" ? receipt.receiptId : key
  const runId = receipt._tag === "Accepted" || receipt._tag === "AlreadyApplied" || receipt._tag === "Terminal"
    ? receipt.runId
    : undefined
  return { _tag: "AlreadyApplied", receiptId, ...(runId === undefined ? {} : { runId }) }
}
