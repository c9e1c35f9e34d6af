/**
 * Plan card construction of the control runtime (docs/design/control.md, Plans and digests).
 */
import * as Redaction from "@baton/journal/Redaction"
import { Effect, Schema } from "effect"
import { InvalidInput } from "../ControlError.js"
import type { Budget, Envelope, PlanCard } from "../ControlSchema.js"
import type { DurableFlow, PlanInput } from "../ControlRuntime.js"
import { isDurableTextOfLength, sha256, tryCanonical } from "./canonical.js"
import { describeIssue } from "./schemaIssue.js"

/** The rule of every budget number. */
export const budgetRule = "must be a non-negative safe integer"

/** A budget number: a count (tokens) or milliseconds, so a non-negative safe integer. */
const BudgetNumber = Schema.Number.pipe(
  Schema.filter((n) => Number.isSafeInteger(n) && n >= 0)
).annotations({ message: () => ({ message: budgetRule, override: true }) })

/**
 * A submitted budget: `tokens` (count), `milliseconds`, `deadline` (ms after launch). The facade
 * and the runtime admit budgets with this schema (excess fields refused).
 */
export const AdmittedBudget = Schema.Struct({
  tokens: Schema.optional(BudgetNumber),
  milliseconds: Schema.optional(BudgetNumber),
  deadline: Schema.optional(BudgetNumber)
})

const decodeBudget = Schema.decodeUnknownEither(AdmittedBudget, { onExcessProperty: "error" })

/**
 * Admits a plan request before anything is read or written: the budget as the facade admits it
 * (`budget.tokens: must be a non-negative safe integer`) and a well-formed idempotency key.
 */
export const checkPlanInput = (input: PlanInput): Effect.Effect<void, InvalidInput> => {
  if (input.idempotencyKey !== undefined && !isDurableTextOfLength(input.idempotencyKey, 1024)) {
    return Effect.fail(new InvalidInput({ issue: "idempotencyKey: must be 1 to 1024 well-formed characters" }))
  }
  if (input.budget === undefined) return Effect.void
  const decoded = decodeBudget(input.budget)
  return decoded._tag === "Right" ? Effect.void : Effect.fail(new InvalidInput({ issue: describeIssue(decoded.left, "budget") }))
}

/**
 * The displayed form of a canonical input summary: the journal's default `Redaction` applied (the same
 * rules as journal entries). A summary that is not JSON, or nests past the redactor's depth, is not shown.
 */
export const redactSummary = (summary: string): string => {
  try {
    const redacted = tryCanonical(Redaction.redact(JSON.parse(summary) as unknown), "input")
    return redacted.ok ? redacted.text : Redaction.placeholder
  } catch {
    return Redaction.placeholder
  }
}

/** Canonical request fingerprint `{ flowId, input, budget? }`. */
export const planFingerprint = (input: PlanInput): Effect.Effect<string, InvalidInput> => {
  const result = tryCanonical(
    input.budget === undefined ? { flowId: input.flowId, input: input.input } : { flowId: input.flowId, input: input.input, budget: input.budget },
    "input"
  )
  return result.ok ? Effect.succeed(result.text) : Effect.fail(new InvalidInput({ issue: result.issue }))
}

/** The flow's decoded input, or the input itself when it is canonical JSON. */
export const decodeInput = (flow: DurableFlow, input: unknown): Effect.Effect<unknown, InvalidInput> =>
  flow.decode !== undefined
    ? flow.decode(input)
    : Effect.suspend(() => {
      const result = tryCanonical(input, "input")
      return result.ok ? Effect.succeed(JSON.parse(result.text) as unknown) : Effect.fail(new InvalidInput({ issue: result.issue }))
    })

const overlayBudget = (base: Budget, overlay: Budget | undefined): Budget => {
  if (overlay === undefined) return base
  const out: { tokens?: number; milliseconds?: number; deadline?: number } = {}
  for (const key of ["tokens", "milliseconds", "deadline"] as const) {
    const value = overlay[key] ?? base[key]
    if (value !== undefined) out[key] = value
  }
  return out
}

/** The plan's key: the caller's idempotency key when given. */
export const approvalKey = (input: PlanInput, planId: string) => input.idempotencyKey ?? `approve:${planId}`

/**
 * Build the immutable card for `planId` (digest binds input, envelope, deploy class, code and handoff);
 * `digestOf` is the hash: `sha256` unless a batch hashes in place.
 */
export const buildCard = (
  flow: DurableFlow,
  input: PlanInput,
  decoded: unknown,
  planId: string,
  digestOf: (text: string) => Effect.Effect<string> = sha256
): Effect.Effect<PlanCard, InvalidInput> =>
  Effect.gen(function*() {
    const hook = flow.plan === undefined ? undefined : yield* flow.plan(decoded, planId)
    const envelope: Envelope = { ...flow.envelope, budget: overlayBudget(flow.envelope.budget, input.budget) }
    const bound = tryCanonical({
      flowId: flow.flowId,
      input: decoded,
      envelope,
      deployClass: flow.deployClass,
      ...(flow.executionDigest === undefined ? {} : { executionDigest: flow.executionDigest }),
      persistedPlan: hook?.handoff.planDigest ?? null
    }, "plan")
    if (!bound.ok) return yield* Effect.fail(new InvalidInput({ issue: bound.issue }))
    const summary = tryCanonical(decoded, "input")
    if (!summary.ok) return yield* Effect.fail(new InvalidInput({ issue: summary.issue }))
    const digest = yield* digestOf(bound.text)
    const card: PlanCard = {
      planId,
      flowId: flow.flowId,
      digest,
      // Cards are shown to people: the summary is redacted; the digest and stored input are not.
      inputSummary: redactSummary(summary.text),
      envelope,
      deployClass: flow.deployClass,
      ...(flow.executionDigest === undefined ? {} : { executionDigest: flow.executionDigest }),
      ...(hook === undefined ? {} : { handoff: hook.handoff }),
      nodes: hook?.handoff.nodes ?? [],
      ...(hook?.graph === undefined ? {} : { graph: hook.graph }),
      approval: {
        target: { _tag: "Plan", planId, digest, envelope },
        scope: "run",
        idempotencyKey: approvalKey(input, planId)
      }
    }
    return card
  })

/** The refusal for an idempotency key reused with another plan request. */
export const planKeyConflict = (key: string) => new InvalidInput({ issue: `idempotency key ${key} was used for another plan` })
