/**
 * Named steps: fenced attempts whose successful results are memoized per run, with checkpoints
 * to resume from after a crash, and waits that park the run until a signal or an approval.
 *
 * Guarantees: a step's `commit` writes and its completion record commit exactly once per run
 * (fenced, atomic); the body runs at least once (again after a crash mid-step), so effects
 * outside the database need their own idempotency.
 *
 * @since 0.1.0
 */
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Duration, Option, Schedule, Schema } from "effect"
import { Effect } from "effect"
import { StepMisuse as Misuse } from "./internal/executorMisuse.js"
import * as State from "./internal/executorState.js"
import * as Steps from "./internal/executorStep.js"
import type { Json as JsonValue } from "./internal/executorTypes.js"
import * as Waits from "./internal/executorWaits.js"
import { Run } from "./Run.js"

/**
 * A JSON value.
 *
 * @since 0.1.0
 * @category models
 */
export type Json = JsonValue

/**
 * Misuse of the step API (a defect that fails the run with its message). Codes:
 * `invalid_name`, `invalid_options`, `duplicate_step`, `result_not_json`, `result_mismatch`,
 * `outside_run`.
 *
 * @since 0.1.0
 * @category errors
 */
export const StepMisuse = Misuse

/**
 * @since 0.1.0
 * @category errors
 */
export type StepMisuse = Misuse

/**
 * The step an effect runs in: `name`, `attempt` (0 first), and the checkpoint `resumeFrom`
 * left by an interrupted or abandoned earlier attempt.
 *
 * @since 0.1.0
 * @category services
 */
export const StepContext = Steps.StepContext

/**
 * @since 0.1.0
 * @category services
 */
export type StepContext = Steps.StepContext

/**
 * Options of {@link run}:
 * - `result`: the storage encoding of the result (its encoded side must be JSON); default: the
 *   result must itself be JSON;
 * - `commit`: SQL writes committed atomically with the fenced completion (exactly once per run);
 * - `summarize`: a JSON detail (≤ 1 KiB of UTF-8) for the `baton.step.completed` entry; a detail
 *   that is not JSON or is larger is left out, with a warning naming the step and the rule;
 * - `retry`: `times` (a non-negative integer) more attempts after a failure, `delay` (a finite,
 *   non-negative duration) between them, or (since 0.2.0) `schedule`, an Effect `Schedule` fed each
 *   failure that paces the attempts and may end them sooner (e.g. `Schedule.exponential("100 millis")
 *   .pipe(Schedule.jittered)`).
 *
 * Options of other shapes fail the run with `StepMisuse` `invalid_options` naming the option,
 * before the step writes anything.
 *
 * @since 0.1.0
 * @category models
 */
export interface StepOptions<A, AE> {
  readonly result?: Schema.Schema<A, AE>
  readonly commit?: (value: A) => Effect.Effect<void, unknown, SqlClient.SqlClient>
  readonly summarize?: (value: A) => Json
  readonly retry?: {
    readonly times: number
    readonly delay?: Duration.DurationInput
    readonly schedule?: Schedule.Schedule<unknown, any>
  }
}

const stateOf = Effect.flatMap(Run, (run) => {
  const state = State.stateOf(run)
  return state === undefined
    ? Effect.die(new Misuse({ code: "outside_run", step: "", message: "not inside a drive of the node executor" }))
    : Effect.succeed(state)
})

/**
 * Run `body` as the named step. A step completed in an earlier drive returns its stored
 * result without running. Names: 1..200 UTF-16 code units, no U+0000, not starting with `$`, unique
 * per run (else `StepMisuse`). While the host is stopping, the drive ends instead.
 *
 * @since 0.1.0
 * @category steps
 */
export const run = <A, E, R, AE = A>(
  name: string,
  body: Effect.Effect<A, E, R>,
  options?: StepOptions<A, AE>
): Effect.Effect<A, E, Exclude<R, StepContext> | Run> =>
  Effect.flatMap(stateOf, (state) => Steps.runStep(state, name, body, options))

/**
 * Record a checkpoint of the current step attempt (inert JSON, within the attempt store's
 * ceiling, one transaction per call). A later attempt after a crash or interruption receives
 * it as {@link resumeFrom}. A lost fence ends the drive.
 *
 * @since 0.1.0
 * @category steps
 */
export const checkpoint = (value: Json): Effect.Effect<void, never, StepContext | Run> =>
  Effect.flatMap(stateOf, (state) => Effect.flatMap(Steps.StepContext, (step) => Steps.checkpoint(state, step, value)))

/**
 * The checkpoint this attempt resumes from, if any.
 *
 * @since 0.1.0
 * @category steps
 */
export const resumeFrom: Effect.Effect<Option.Option<Json>, never, StepContext> = Effect.map(
  Steps.StepContext,
  (step) => step.resumeFrom
)

/**
 * Wait for the signal `name`: answered from a signal already sent (even before the wait
 * opened), else the run parks (`parked`, wait `event:<name>`) and a later drive answers it.
 * A payload `schema` refuses is settled `rejected`; the wait stays open.
 *
 * @since 0.1.0
 * @category waits
 */
export const waitForSignal = <A = Json, AE = Json>(
  name: string,
  options?: { readonly schema?: Schema.Schema<A, AE>; readonly request?: Json }
): Effect.Effect<A, never, Run> => Effect.flatMap(stateOf, (state) => Waits.waitForSignal(state, name, options))

/**
 * Wait for an approval of `requestId` (a Node approval target of this run): returns once
 * approved, fails `ApprovalDenied` (deciding principal and reason) once denied, else parks the
 * run (`waiting-approval`).
 *
 * @since 0.1.0
 * @category waits
 */
export const waitForApproval = (
  requestId: string,
  options?: { readonly request?: Json }
): Effect.Effect<void, ControlRuntime.ApprovalDenied, Run> =>
  Effect.flatMap(stateOf, (state) => Waits.waitForApproval(state, requestId, options))
