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

/** Runs `effect` in span `name`, annotating and counting its outcome. */
export const traced = <A, E, R>(
  name: string,
  counter: Metric.Metric.Counter<number> | undefined,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  effect.pipe(
    Effect.onExit((exit) => {
      const outcome = outcomeOf(exit)
      const annotate = Effect.annotateCurrentSpan("outcome", outcome)
      return counter === undefined
        ? annotate
        : Effect.zipRight(annotate, Metric.increment(Metric.tagged(counter, "outcome", outcome)))
    }),
    Effect.withSpan(name)
  )
