/** `StepMisuse`, defined apart so Run and Step can both raise it. */
import { Schema } from "effect"

/**
 * A handler used the step API wrongly. Raised as a defect: the run fails with its message.
 * Codes: `invalid_name`, `invalid_options`, `duplicate_step`, `result_not_json`, `result_mismatch`,
 * `outside_run`.
 *
 * @since 0.1.0
 * @category errors
 */
export class StepMisuse extends Schema.TaggedError<StepMisuse>()("@baton/node/StepMisuse", {
  code: Schema.Literal("invalid_name", "invalid_options", "duplicate_step", "result_not_json", "result_mismatch", "outside_run"),
  step: Schema.String,
  message: Schema.String
}) {}
