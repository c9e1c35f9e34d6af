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
