/**
 * The control plane's typed errors. Each is a `Schema.TaggedError` whose tag is the bare class name and
 * whose `code` is a stable constant, defaulted at construction.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { RunHost } from "./ControlSchema.js"

const code = <C extends string>(value: C) =>
  Schema.optionalWith(Schema.Literal(value), { default: () => value })

/**
 * An approval token was already decided. Code `already_resolved`.
 *
 * @since 0.1.0
 * @category errors
 */
export class AlreadyResolved extends Schema.TaggedError<AlreadyResolved>()("AlreadyResolved", {
  code: code("already_resolved"),
  requestId: Schema.String
}) {
  override get message() {
    return `approval ${this.requestId} was already resolved`
  }
}

/**
 * Another owner holds the run, the caller's fence is spent, or the parking host is alive (`parkedBy`).
 * Code `claim_lost`.
 *
 * @since 0.1.0
 * @category errors
 */
export class ClaimLost extends Schema.TaggedError<ClaimLost>()("ClaimLost", {
  code: code("claim_lost"),
  runId: Schema.String,
  reason: Schema.optional(Schema.String),
  parkedBy: Schema.optional(RunHost)
}) {
  override get message() {
    return `run ${this.runId}: ownership lost${this.reason === undefined ? "" : ` (${this.reason})`}`
  }
}

/**
 * The code a run recorded differs from the code on disk now. Code `code_drift`.
 *
 * @since 0.1.0
 * @category errors
 */
export class CodeDrift extends Schema.TaggedError<CodeDrift>()("CodeDrift", {
  code: code("code_drift"),
  runId: Schema.String,
  flowId: Schema.String,
  recorded: Schema.optional(Schema.String),
  current: Schema.optional(Schema.String),
  recordedEngine: Schema.optional(Schema.String),
  currentEngine: Schema.optional(Schema.String)
}) {
  override get message() {
    return `run ${this.runId} of flow ${this.flowId} recorded code that differs from the code available now`
  }
}

/**
 * The submitted envelope differs from the stored one (canonical strings). Code `envelope_mismatch`.
 *
 * @since 0.1.0
 * @category errors
 */
export class EnvelopeMismatch extends Schema.TaggedError<EnvelopeMismatch>()("EnvelopeMismatch", {
  code: code("envelope_mismatch"),
  planId: Schema.String,
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message() {
    return `envelope of ${this.planId} does not match the approved envelope`
  }
}

/**
 * No flow with this id in the catalog. Code `flow_not_found`.
 *
 * @since 0.1.0
 * @category errors
 */
export class FlowNotFound extends Schema.TaggedError<FlowNotFound>()("FlowNotFound", {
  code: code("flow_not_found"),
  flowId: Schema.String
}) {
  override get message() {
    return `flow ${this.flowId} is not in the catalog`
  }
}

/**
 * Input refused; `issue` names the field and the rule. Code `invalid_input`.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  code: code("invalid_input"),
  issue: Schema.String
}) {
  override get message() {
    return this.issue
  }
}

/**
 * A storage step failed; `operation` names the step. Code `persistence_failed`.
 *
 * @since 0.1.0
 * @category errors
 */
export class PersistenceError extends Schema.TaggedError<PersistenceError>()("PersistenceError", {
  code: code("persistence_failed"),
  operation: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * The plan was denied. Code `plan_denied`.
 *
 * @since 0.1.0
 * @category errors
 */
export class PlanDenied extends Schema.TaggedError<PlanDenied>()("PlanDenied", {
  code: code("plan_denied"),
  planId: Schema.String
}) {
  override get message() {
    return `plan ${this.planId} was denied; create and approve a new plan`
  }
}

/**
 * The submitted digest differs from the stored one. Code `plan_digest_mismatch`.
 *
 * @since 0.1.0
 * @category errors
 */
export class PlanDigestMismatch extends Schema.TaggedError<PlanDigestMismatch>()("PlanDigestMismatch", {
  code: code("plan_digest_mismatch"),
  planId: Schema.String,
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message() {
    return `digest of ${this.planId} does not match: expected ${this.expected}, received ${this.actual}`
  }
}

/**
 * No plan with this id. Code `plan_not_found`.
 *
 * @since 0.1.0
 * @category errors
 */
export class PlanNotFound extends Schema.TaggedError<PlanNotFound>()("PlanNotFound", {
  code: code("plan_not_found"),
  planId: Schema.String
}) {
  override get message() {
    return `plan ${this.planId} was not found; plan again`
  }
}

/**
 * No run with this id. Code `run_not_found`.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunNotFound extends Schema.TaggedError<RunNotFound>()("RunNotFound", {
  code: code("run_not_found"),
  runId: Schema.String
}) {
  override get message() {
    return `run ${this.runId} was not found`
  }
}

/**
 * The caller may not make this decision. Code `unauthorized`.
 *
 * @since 0.1.0
 * @category errors
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  code: code("unauthorized"),
  message: Schema.String
}) {}

/**
 * The executor could not launch an accepted run (facade/executor only). Code `launch_failed`.
 *
 * @since 0.1.0
 * @category errors
 */
export class LaunchFailed extends Schema.TaggedError<LaunchFailed>()("LaunchFailed", {
  code: code("launch_failed"),
  runId: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * No open wait named `waitName` on the run. Code `no_matching_wait`.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoMatchingWait extends Schema.TaggedError<NoMatchingWait>()("NoMatchingWait", {
  code: code("no_matching_wait"),
  runId: Schema.String,
  waitName: Schema.String
}) {
  override get message() {
    return `run ${this.runId} has no open wait named ${this.waitName}`
  }
}

/**
 * A start reused an idempotency key with another flow or input: nothing was written. Code
 * `idempotency_conflict`. The message names the field, never the key or the input.
 *
 * @since 0.2.0
 * @category errors
 */
export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>()("IdempotencyConflict", {
  code: code("idempotency_conflict"),
  field: Schema.String
}) {
  override get message() {
    return `${this.field}: was used for a start of another flow, input or placement (queue, priority, retry, parent)`
  }
}

/**
 * The flow's policy is `approval: "required"`: runs of it start only through a plan
 * (`Control.plan` → approve → `Control.run`). Code `approval_required`.
 *
 * @since 0.2.0
 * @category errors
 */
export class ApprovalRequired extends Schema.TaggedError<ApprovalRequired>()("ApprovalRequired", {
  code: code("approval_required"),
  flowId: Schema.String
}) {
  override get message() {
    return `flow ${this.flowId} requires approval: plan it, approve the plan, then run it`
  }
}

/**
 * The single membership union of every control error.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ControlErrorSchema = Schema.Union(
  AlreadyResolved,
  ClaimLost,
  CodeDrift,
  EnvelopeMismatch,
  FlowNotFound,
  InvalidInput,
  PersistenceError,
  PlanDenied,
  PlanDigestMismatch,
  PlanNotFound,
  RunNotFound,
  Unauthorized,
  LaunchFailed,
  NoMatchingWait,
  IdempotencyConflict,
  ApprovalRequired
)

/**
 * Any control error.
 *
 * @since 0.1.0
 * @category models
 */
export type ControlError = typeof ControlErrorSchema.Type

/**
 * Whether a value is a control error.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isControlError: (u: unknown) => u is ControlError = Schema.is(ControlErrorSchema)
