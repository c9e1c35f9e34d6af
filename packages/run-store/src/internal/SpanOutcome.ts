/**
 * Span and metric outcome recording for store operations: the span closes
 * with `outcome` = the snake-cased tag of the result, `success`, `failure` or
 * `interrupt`, and the same outcome feeds the operation's counter.
 */
import { Cause, Effect, Exit, Metric } from "effect"
import { snakeCase } from "../RunStoreMetrics.js"

/** The outcome attribute of a finished call. */
export const outcomeOf = <A, E>(exit: Exit.Exit<A, E>): string => {
  if (Exit.isSuccess(exit)) {
    const value = exit.value as unknown
    return typeof value === "object" && value !== null && typeof (value as { _tag?: unknown })._tag === "string"
      ? snakeCase((value as { _tag: string })._tag)
      : "success"
  }
  return Cause.isInterruptedOnly(exit.cause) ? "interrupt" : "failure"
}

/**
 * The counter an outcome increments: `base` tagged with `outcome`, then with the
 * `extra` tags (the order the public lookup records use, e.g. `transition.X` then `to`).
 */
export type Counting = {
  readonly base: Metric.Metric.Counter<number>
  readonly extra?: Readonly<Record<string, string>>
}

const counterFor = (counting: Counting, outcome: string) => {
  let counter = Metric.tagged(counting.base, "outcome", outcome)
  for (const [key, value] of Object.entries(counting.extra ?? {})) counter = Metric.tagged(counter, key, value)
  return counter
}

/** Runs `effect` in span `name`, annotating and counting its outcome. */
export const traced = <A, E, R>(
  name: string,
  counting: Counting | undefined,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  effect.pipe(
    Effect.onExit((exit) => {
      const outcome = outcomeOf(exit)
      const annotate = Effect.annotateCurrentSpan("outcome", outcome)
      return counting === undefined
        ? annotate
        : Effect.zipRight(annotate, Metric.increment(counterFor(counting, outcome)))
    }),
    Effect.withSpan(name)
  )
