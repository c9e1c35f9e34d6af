/**
 * NodeRuntime.layerPg passes PostgreSQL's session settings to its database: bad values fail
 * `invalid_options` naming the option before the pool opens, given values reach the server.
 */
import { describe, expect, it } from "@effect/vitest"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("node runtime session settings (layerPg)")

// Nothing listens on port 1: a build that got as far as connecting would fail `connect_failed`.
const unreachable = "postgres://nobody@127.0.0.1:1/none"

const buildError = <A, E>(layer: Layer.Layer<A, E>) => Effect.flip(Effect.scoped(Layer.build(layer)))

describe("NodeRuntime.layerPg session settings", () => {
  it.effect("a session setting that is not a positive duration is invalid_options naming it", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, Partial<NodeRuntime.PgOptions>, string]> = [
        ["statementTimeout", { statementTimeout: 0 }, "statementTimeout: must be a positive finite duration (got 0)"],
        ["statementTimeout", { statementTimeout: "5 seconds" }, "statementTimeout: must be longer than lockTimeout"],
        [
          "idleInTransactionTimeout",
          { idleInTransactionTimeout: -1 },
          "idleInTransactionTimeout: must be a positive finite duration (got -1)"
        ],
        ["keepAliveInitialDelay", { keepAliveInitialDelay: "soon" as never }, "keepAliveInitialDelay: must be a positive finite duration"]
      ]
      for (const [field, extra, rule] of cases) {
        const error = yield* buildError(NodeRuntime.layerPg({ url: unreachable, mode: "client", ...extra }))
        expect(error, field).toMatchObject({ _tag: "@baton/node/NodeRuntimeError", reason: "invalid_options", field })
        expect(error.message, field).toContain(rule)
      }
    }))

  it.live.skipIf(url === undefined)("given session settings reach the server; omitted ones keep the defaults", () =>
    Effect.scoped(Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      const settings = (options: Partial<NodeRuntime.PgOptions>) =>
        Effect.scoped(Effect.gen(function*() {
          const context = yield* Layer.build(NodeRuntime.layerPg({ url: url!, schema, mode: "client", ...options }))
          const sql = Context.get(context, SqlClient.SqlClient)
          return yield* sql<{ idle: string; statement: string }>`
            SELECT current_setting('idle_in_transaction_session_timeout') AS idle,
                   current_setting('statement_timeout') AS statement`
        }))
      expect(yield* settings({ idleInTransactionTimeout: "3 seconds", statementTimeout: "20 seconds" })).toEqual([
        { idle: "3s", statement: "20s" }
      ])
      expect(yield* settings({})).toEqual([{ idle: "10s", statement: "15s" }])
    })), 60_000)
})
