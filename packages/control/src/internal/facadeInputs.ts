/**
 * Admission schemas of the facade's inputs (decoded after the inert copy).
 */
import { Schema } from "effect"
import * as ControlSchema from "../ControlSchema.js"

const Text = (max: number) =>
  Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

/** A submitted principal; `stampedAt` is ignored (the runtime stamps its own clock). */
export const PrincipalInput = Schema.Struct({
  id: Text(1024),
  kind: Text(1024),
  stampedAt: Schema.optional(Schema.Number)
})
export type PrincipalInput = typeof PrincipalInput.Type

export const PlanInput = Schema.Struct({
  flowId: Schema.String,
  input: Schema.optional(Schema.Unknown),
  idempotencyKey: Schema.optional(Schema.String),
  budget: Schema.optional(ControlSchema.Budget)
})

export const RunPlanInput = Schema.TaggedStruct("Plan", {
  planId: Schema.String,
  digest: Schema.String,
  envelope: ControlSchema.Envelope,
  idempotencyKey: Schema.String,
  principal: Schema.optional(PrincipalInput)
})

export const RunResumeInput = Schema.TaggedStruct("Resume", {
  runId: Schema.String,
  idempotencyKey: Schema.String,
  reason: Schema.optional(Schema.String),
  allowCodeDrift: Schema.optional(Schema.Boolean),
  principal: Schema.optional(PrincipalInput)
})

export const RunInput = Schema.Union(RunPlanInput, RunResumeInput)

export const ApprovalInput = Schema.Struct({
  target: ControlSchema.ApprovalTarget,
  scope: ControlSchema.GrantScope,
  idempotencyKey: Schema.String,
  principal: Schema.optional(PrincipalInput),
  reason: Schema.optional(Schema.String)
})

export const SteerInput = Schema.Struct({
  runId: Schema.String,
  message: Schema.Struct({
    messageId: Schema.String,
    runId: Schema.String,
    principal: PrincipalInput,
    createdAt: Schema.Number,
    kind: Schema.optional(Schema.Literal("Message")),
    body: Schema.String
  }),
  idempotencyKey: Schema.String
})

export const SignalInput = Schema.Struct({
  runId: Schema.String,
  signal: ControlSchema.SignalPayload,
  idempotencyKey: Schema.String,
  principal: Schema.optional(PrincipalInput)
})

export const RunMutationInput = Schema.Struct({
  runId: Schema.String,
  idempotencyKey: Schema.String,
  reason: Schema.optional(Schema.String),
  principal: Schema.optional(PrincipalInput)
})

export const ResumeInput = Schema.Struct({
  runId: Schema.String,
  idempotencyKey: Schema.String,
  reason: Schema.optional(Schema.String),
  allowCodeDrift: Schema.optional(Schema.Boolean),
  principal: Schema.optional(PrincipalInput)
})
