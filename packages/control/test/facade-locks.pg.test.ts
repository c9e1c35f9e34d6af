/**
 * Check 49: per-run lock keys on PostgreSQL. Two hosts (two pools on one
 * schema): an approval on R1 whose authority policy is held open inside the
 * write blocks host 2's work on R1 and a schema-wide plan, but not host 2's
 * cancel of R2.
 */
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Deferred, Effect, Fiber, Layer, Option } from "effect"
import * as ApprovalAuthority from "../src/ApprovalAuthority.js"
import * as Control from "../src/Control.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import * as SqlControlRuntime from "../src/SqlControlRuntime.js"
import { envelope, flows } from "./fixtures/facadeFlows.js"
import { launchRun } from "./fixtures/facadeLifecycle.js"
import { sqlControl } from "./fixtures/facadeLayers.js"

const url = TestDatabase.postgresTestUrl("control facade locks")

const realDelay = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

describe.skipIf(url === undefined)("facade lock keys (PostgreSQL)", () => {
  it.live("[49] a held node approval on R1 blocks work on R1 and schema-wide plans, not a cancel of R2", () =>
    Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let calls = 0
      // The facade asks the authority once before its transaction and once inside it; hold the second.
      const holding: ApprovalAuthority.Service = {
        authorize: (request) =>
          Effect.gen(function*() {
            calls++
            if (request.target._tag === "Node" && calls === 2) {
              yield* Deferred.succeed(entered, undefined)
              yield* Deferred.await(release)
            }
            return yield* ApprovalAuthority.local.authorize(request)
          })
      }
      const runtime1 = yield* ControlRuntime.ControlRuntime
      const sql = yield* SqlClient.SqlClient
      const schema = (yield* sql<{ readonly schema: string }>`SELECT current_schema() AS schema`)[0]!.schema

      const r1 = (yield* launchRun("r1", { a: 1 })).runId
      const r2 = (yield* launchRun("r2", { a: 2 })).runId
      const target = { _tag: "Node" as const, runId: r1, requestId: "gate", digest: "g", envelope }
      yield* runtime1.resume(r1)
      yield* runtime1.registerApproval(target)
      yield* runtime1.park(r1, yield* runtime1.claimFence(r1), { reason: "approval", token: "T1" })

      const host2Context = yield* Layer.build(sqlControl(PgDatabase.layer({ url: url!, schema }), { flows }))
      const host2 = Context.get(host2Context, Control.Control)

      const holdingRuntime = yield* SqlControlRuntime.make({ flows, approvalAuthority: holding })
      const approver = yield* Control.make.pipe(Effect.provideService(ControlRuntime.ControlRuntime, holdingRuntime))
      const approving = yield* Effect.fork(approver.approve({ target, scope: "once", idempotencyKey: "a" }))
      // Wait for the policy to be entered inside the write (or report why the approval ended early).
      const early = yield* Effect.raceFirst(
        Deferred.await(entered).pipe(Effect.as(undefined)),
        Fiber.await(approving).pipe(Effect.map((exit) => exit))
      )
      expect(early).toBeUndefined()

      // Another run's key: host 2 commits while host 1's transaction is open.
      const other = yield* host2.cancel({ runId: r2, idempotencyKey: "c2" })
      expect(other._tag === "Terminal" || other._tag === "Accepted").toBe(true)
      expect(Option.isNone(yield* Fiber.poll(approving))).toBe(true)

      // The same run's key and a schema-wide plan wait for host 1's commit.
      const sameRun = yield* Effect.fork(host2.cancel({ runId: r1, idempotencyKey: "c1" }))
      const planning = yield* Effect.fork(host2.plan({ flowId: "F", input: { a: 3 } }))
      yield* realDelay(500)
      expect(Option.isNone(yield* Fiber.poll(sameRun))).toBe(true)
      expect(Option.isNone(yield* Fiber.poll(planning))).toBe(true)

      yield* Deferred.succeed(release, undefined)
      const approved = yield* Fiber.join(approving)
      expect(approved).toEqual({ _tag: "Accepted", receiptId: "a", runId: r1 })
      const cancelled = yield* Fiber.join(sameRun)
      expect(cancelled).toEqual({ _tag: "Terminal", runId: r1, status: "cancelled" })
      const card = yield* Fiber.join(planning)
      expect(card.flowId).toBe("F")
    }).pipe(
      Effect.provide(sqlControl(TestDatabase.layerPostgres(url!), { flows })),
      Effect.scoped
    ))
})

