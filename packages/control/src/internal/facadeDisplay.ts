/**
 * Display views of what the facade answers: a plan card is shown to people,
 * so its `inputSummary` passes the journal's default `Redaction` (the same
 * rules as journal entries). The stored plan, its digest and the decoded
 * input the executor receives are untouched.
 */
import * as Redaction from "@baton/journal/Redaction"
import type * as ControlSchema from "../ControlSchema.js"
import { tryCanonical } from "./canonical.js"

const redactSummary = (summary: string): string => {
  try {
    const redacted = tryCanonical(Redaction.redact(JSON.parse(summary) as unknown), "input")
    return redacted.ok ? redacted.text : Redaction.placeholder
  } catch {
    // A summary that is not JSON (or nests past the redactor's depth) is not shown at all.
    return Redaction.placeholder
  }
}

/** The card with a redacted `inputSummary`. */
export const displayCard = (card: ControlSchema.PlanCard): ControlSchema.PlanCard => ({
  ...card,
  inputSummary: redactSummary(card.inputSummary)
})
