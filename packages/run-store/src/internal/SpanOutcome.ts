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

// Tagged counters are built once per (base, outcome, extra tags): building one per call
// rehashes its key in the metric registry on every store operation.
const counters = new WeakMap<Metric.Metric.Counter<number>, Map<string, Metric.Metric.Counter<number>>>()

const counterFor = (counting: Counting, outcome: string) => {
  const extra = Object.entries(counting.extra ?? {})
  const cacheKey = JSON.stringify([outcome, extra])
  let byKey = counters.get(counting.base)
  if (byKey === undefined) {
    byKey = new Map()
    counters.set(counting.base, byKey)
  }
  const cached = byKey.get(cacheKey)
  if (cached !== undefined) return cached
  let counter = Metric.tagged(counting.base, "outcome", outcome)
  for (const [key, value] of extra) counter = Metric.tagged(counter, key, value)
  if (byKey.size < 256) byKey.set(cacheKey, counter)
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
