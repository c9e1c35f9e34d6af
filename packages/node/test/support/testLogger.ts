/**
 * A test Logger that records every log line (level, message, annotations, whether a cause or a
 * `cause` annotation rode along) down to DEBUG, for tests of what the host logs and at which level.
 */
import { Cause, Effect, HashMap, Logger, LogLevel } from "effect"

/** One recorded log line. */
export interface Line {
  readonly level: LogLevel.LogLevel["label"]
  readonly message: string
  readonly annotations: Readonly<Record<string, unknown>>
  readonly hasCause: boolean
}

/** A recorder: its `lines`, and `capture` to run an effect (and the fibers it forks) logging into them. */
export const make = () => {
  const lines: Array<Line> = []
  const logger = Logger.make<unknown, void>(({ annotations, cause, logLevel, message }) => {
    const annotated = Object.fromEntries(HashMap.toEntries(annotations))
    lines.push({
      level: logLevel.label,
      message: (Array.isArray(message) ? message : [message]).map(String).join(" "),
      annotations: annotated,
      hasCause: !Cause.isEmpty(cause) || "cause" in annotated
    })
  })
  const capture = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Logger.withMinimumLogLevel(LogLevel.Debug), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  return { lines, capture }
}
