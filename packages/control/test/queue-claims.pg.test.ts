/**
 * Queue semantics of the SQL runtime on PostgreSQL: the shared suite, plus claims of one limited queue
 * racing from two pools (two hosts) over one schema: never more than the limit running.
 */
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as ControlRuntime from "../src/ControlRuntime.js"
import * as Queues from "../src/Queues.js"
import * as SqlControlRuntime from "../src/SqlControlRuntime.js"
import { claim, released, runningIn, runtimeLayer, suite } from "./fixtures/queueClaims.js"
import { defaultFlows, sqlJournal } from "./fixtures/runtimeSupport.js"

const url = TestDatabase.postgresTestUrl("control queues")

/** A second host: its own pool and runtime (another owner) on the test's schema. */
const secondHost = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const schema = (yield* sql<{ s: string }>`SELECT current_schema() AS s`)[0]!.s
  const second = yield* Layer.build(Layer.orDie(Layer.provideMerge(
    SqlControlRuntime.layer({ flows: defaultFlows }),
    Layer.provideMerge(sqlJournal(), Layer.provideMerge(RunStore.layer, PgDatabase.layer({ url: url!, schema, maxConnections: 8 })))
  )))
  return yield* Effect.provide(ControlRuntime.ControlRuntime, second)
})

describe.skipIf(url === undefined)("queues on PostgreSQL", () => {
  suite(() => TestDatabase.layerPostgres(url!))

  it.effect("claims of a queue limited to 3 racing from two pools: exactly 3 win, the rest are QueueFull", () =>
    Effect.gen(function*() {
      const other = yield* secondHost
      yield* Effect.flatMap(Queues.Queues, (q) => q.setConcurrency("race", 3))
      const ids: Array<string> = []
      for (let i = 0; i < 12; i++) ids.push(yield* released({ queue: "race" }))
      const fromSecond = (runId: string) =>
        other.resume(runId).pipe(
          Effect.as("claimed" as const),
          Effect.catchTag("ClaimLost", (e) => Effect.succeed(e.reason ?? "ClaimLost"))
        )
      const outcomes = yield* Effect.all(
        ids.map((runId, i) => (i % 2 === 0 ? claim(runId) : fromSecond(runId))),
        { concurrency: "unbounded" }
      )
      expect(outcomes.filter((o) => o === "claimed")).toHaveLength(3)
      expect(outcomes.filter((o) => o === Queues.fullReason)).toHaveLength(9)
      expect(yield* runningIn("race")).toBe(3)
    }).pipe(Effect.provide(runtimeLayer(TestDatabase.layerPostgres(url!))), Effect.scoped))
  it.effect("claimNext racing from two pools: every released run is claimed once, by one of them", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rt = yield* ControlRuntime.ControlRuntime
      const other = yield* secondHost
      const ids = new Set<string>()
      for (let i = 0; i < 40; i++) ids.add(yield* released())
      const drain = (runtime: ControlRuntime.Service) =>
        Effect.gen(function*() {
          const mine: Array<string> = []
          for (;;) {
            const { claimed } = yield* runtime.claimNext({ flowIds: ["F"], nowMs: 0, limit: 3 })
            if (claimed.length === 0) return mine
            for (const c of claimed) mine.push(c.summary.runId)
          }
        })
      const [a, b, c] = yield* Effect.all([drain(rt), drain(other), drain(rt)], { concurrency: "unbounded" })
      const all = [...a, ...b, ...c]
      expect(new Set(all).size).toBe(all.length)
      expect(new Set(all)).toEqual(ids)
      const running = yield* sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM flows_runs WHERE status = 'running'`
      expect(Number(running[0]!.n)).toBe(ids.size)
    }).pipe(Effect.provide(runtimeLayer(TestDatabase.layerPostgres(url!))), Effect.scoped))
})
