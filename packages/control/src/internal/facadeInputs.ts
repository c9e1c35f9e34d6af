/**
 * Admission schemas of the facade's inputs (decoded after the inert copy).
 */
import { Schema } from "effect"
import * as ControlSchema from "../ControlSchema.js"
import { namePattern } from "./queueSql.js"
import { AdmittedSignal } from "./runtimeChecks.js"
import { AdmittedBudget } from "./runtimePlanning.js"

const Text = (max: number) =>
  Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

/** A submitted principal; `stampedAt` is ignored (the runtime stamps its own clock). */
export const PrincipalInput = Schema.Struct({
  id: Text(1024),
  kind: Text(1024),
  stampedAt: Schema.optional(Schema.Number)
})
export type PrincipalInput = typeof PrincipalInput.Type

/** The rule of every id a caller names (run, plan, flow ids). */
export const idRule = "must be 1 to 1024 well-formed characters"

/** An id: 1..1024 UTF-16 units (NUL and lone surrogates are refused by the inert copy first). */
export const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1024)).annotations({
  message: () => ({ message: idRule, override: true })
})

/** A queue name, as a start or `Queues` takes it. */
const QueueName = Schema.String.pipe(Schema.pattern(namePattern)).annotations({
  message: () => ({ message: "must be 1 to 128 characters matching /^[a-z0-9][a-z0-9._\\/-]{0,127}$/", override: true })
})

export const PlanInput = Schema.Struct({
  flowId: Id,
  input: Schema.optional(Schema.Unknown),
  idempotencyKey: Schema.optional(Schema.String),
  // The runtimes admit budgets with the same schema.
  budget: Schema.optional(AdmittedBudget)
})

export const RunPlanInput = Schema.TaggedStruct("Plan", {
  planId: Id,
  digest: Schema.String,
  envelope: ControlSchema.Envelope,
  idempotencyKey: Schema.String,
  principal: Schema.optional(PrincipalInput)
})

export const RunResumeInput = Schema.TaggedStruct("Resume", {
  runId: Id,
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
  runId: Id,
  message: Schema.Struct({
    messageId: Schema.String,
    runId: Id,
    principal: PrincipalInput,
    createdAt: Schema.Number,
    kind: Schema.optional(Schema.Literal("Message")),
    body: Schema.String
  }),
  idempotencyKey: Schema.String
})

export const SignalInput = Schema.Struct({
  runId: Id,
  signal: AdmittedSignal,
  idempotencyKey: Schema.String,
  principal: Schema.optional(PrincipalInput)
})

export const RunMutationInput = Schema.Struct({
  runId: Id,
  idempotencyKey: Schema.String,
  reason: Schema.optional(Schema.String),
  principal: Schema.optional(PrincipalInput)
})

export const ResumeInput = Schema.Struct({
  runId: Id,
  idempotencyKey: Schema.String,
  reason: Schema.optional(Schema.String),
  allowCodeDrift: Schema.optional(Schema.Boolean),
  principal: Schema.optional(PrincipalInput)
})

/** `ControlSchema.ListRequest` with its ids admitted like every other id (non-empty, bounded). */
export const ListRequest = Schema.Union(
  Schema.TaggedStruct("flows", {
    cursor: Schema.optional(Schema.String),
    limit: Schema.optional(ControlSchema.PageLimit)
  }),
  Schema.TaggedStruct("plans", {
    filters: Schema.optional(Schema.Struct({
      flowId: Schema.optional(Id),
      decision: Schema.optional(ControlSchema.PlanDecision)
    })),
    cursor: Schema.optional(Schema.String),
    limit: Schema.optional(ControlSchema.PageLimit)
  }),
  Schema.TaggedStruct("runs", {
    filters: Schema.optional(Schema.Struct({
      ...ControlSchema.RunListFilters.fields,
      runId: Schema.optional(Id),
      flowId: Schema.optional(Id),
      parentRunId: Schema.optional(Id),
      lineageId: Schema.optional(Id),
      principalId: Schema.optional(Id),
      queue: Schema.optional(QueueName)
    })),
    order: Schema.optional(Schema.Literal("newest", "oldest")),
    cursor: Schema.optional(Schema.String),
    limit: Schema.optional(ControlSchema.PageLimit)
  })
)
