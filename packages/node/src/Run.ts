/**
 * The drive a flow handler runs in: which run, which drive of it, why, and under which fence.
 *
 * @since 0.1.0
 */
import { Context, Effect, Option } from "effect"
import * as State from "./internal/executorState.js"
import type { DriveCause as Cause, EndReason as Reason, Json, RunService } from "./internal/executorTypes.js"
import { durable, failJournal, withPrelude } from "./internal/executorJournal.js"
import { StepMisuse } from "./internal/executorMisuse.js"

/**
 * Why a drive started: `launch` (this process launched it), `released` (picked up after a
 * release), `takeover` (from a dead or stale owner), `delegation`, `signal`, `resume`.
 *
 * @since 0.1.0
 * @category models
 */
export type DriveCause = Cause

/**
 * Why a drive ended, for finalizers (`Run.endReason`).
 *
 * @since 0.1.0
 * @category models
 */
export type EndReason = Reason

/**
 * The drive's identity: `runId`, `flowId`, the launching `planId`, `drive` (1 for the first
 * drive, +1 per later one), its `cause`, and the fence `owner` it writes under.
 *
 * @since 0.1.0
 * @category services
 */
export class Run extends Context.Tag("@baton/node/Run")<Run, RunService>() {}

const stateOrDie = (run: RunService): Effect.Effect<State.DriveState> => {
  const state = State.stateOf(run)
  return state === undefined
    ? Effect.die(new StepMisuse({ code: "outside_run", step: "", message: "not inside a drive of the node executor" }))
    : Effect.succeed(state)
}

/**
 * Counters of the run so far: `drives` and `takeovers` (from the run's journal), and for this
 * drive `skippedSteps` (memoized steps returned without running) and `resumedFromCheckpoint`.
 *
 * @since 0.1.0
 * @category accessors
 */
export const stats: Effect.Effect<
  { readonly drives: number; readonly takeovers: number; readonly skippedSteps: number; readonly resumedFromCheckpoint: number },
  never,
  Run
> = Effect.flatMap(Run, stateOrDie).pipe(Effect.map((s) => ({
  drives: s.drives,
  takeovers: s.takeovers,
  skippedSteps: s.skippedSteps,
  resumedFromCheckpoint: s.resumedFromCheckpoint
})))

/**
 * Why the drive is ending, once known (read it in finalizers to tell a cancel from a park or a
 * shutdown); `None` while the handler runs normally.
 *
 * @since 0.1.0
 * @category accessors
 */
export const endReason: Effect.Effect<Option.Option<EndReason>, never, Run> = Effect.flatMap(Run, (run) =>
  Effect.sync(() => State.stateOf(run)?.endReason ?? Option.none()))

const reservedPrefixes = ["baton.", "flows.", "control."]

/**
 * Append an application event to the run's stream under the drive's fence (durable, source
 * `@baton/node`). Types starting `baton.`, `flows.` or `control.` are misuse (a defect). A lost
 * fence or a storage failure ends the drive.
 *
 * @since 0.1.0
 * @category journal
 */
export const emit = (eventType: string, payload: Json): Effect.Effect<void, never, Run> =>
  Effect.gen(function*() {
    const state = yield* stateOrDie(yield* Run)
    if (reservedPrefixes.some((prefix) => eventType.startsWith(prefix))) {
      return yield* Effect.die(new StepMisuse({
        code: "invalid_name",
        step: eventType,
        message: `event type ${eventType} is reserved (baton., flows. and control. belong to Baton)`
      }))
    }
    yield* withPrelude(state, durable(state, eventType, payload)).pipe(Effect.catchAll((error) => failJournal(state, error)))
  })
