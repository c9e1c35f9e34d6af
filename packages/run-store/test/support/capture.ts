/**
 * Records the SQL text of every statement an effect issues.
 */
import * as Statement from "@effect/sql/Statement"
import { Effect } from "effect"

export const captureSql = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const statements: Array<string> = []
    return Effect.map(
      Statement.withTransformer(effect, (self) => {
        statements.push(self.compile()[0])
        return Effect.succeed(self)
      }),
      (value) => ({ value, statements })
    )
  })

/**
 * A statement log readable while `within(effect)` still runs: every statement `effect` and the
 * fibers it forks (after `within` took effect) issue, in order.
 */
export const sqlLog = () => {
  const statements: Array<string> = []
  return {
    statements,
    within: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Statement.withTransformer(effect, (self) => {
        statements.push(self.compile()[0])
        return Effect.succeed(self)
      })
  }
}

/** How many of `statements` renew heartbeat stamps (`UPDATE flows_runs … SET heartbeat_at_ms …`). */
export const heartbeatUpdates = (statements: ReadonlyArray<string>): number =>
  statements.filter((text) => /^\s*UPDATE flows_runs\b[\s\S]*?\bSET heartbeat_at_ms\b/.test(text)).length
