/**
 * Display views of what the facade answers: a plan card is shown to people,
 * so its `inputSummary` passes the journal's default `Redaction` (the same
 * rules as journal entries). The runtimes store cards redacted already; this
 * keeps cards stored before they did so from being shown in clear. The stored
 * input, the digest and the decoded input the executor receives are untouched.
 */
import type * as ControlSchema from "../ControlSchema.js"
import { redactSummary } from "./runtimePlanning.js"

/** The card with a redacted `inputSummary`. */
export const displayCard = (card: ControlSchema.PlanCard): ControlSchema.PlanCard => ({
  ...card,
  inputSummary: redactSummary(card.inputSummary)
})
