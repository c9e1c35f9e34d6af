/**
 * Check 49: per-run lock keys on PostgreSQL. Two hosts (two pools on one
 * schema): an approval on R1 whose authority policy is held open inside the
 * write blocks host 2's work on R1 and a schema-wide plan, but not host 2's
 * cancel of R2. A launch held open on one plan does not block host 2's launch
 * of another plan.
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

  it.live("a facade launch held open on one plan lets host 2 launch another plan, waiting on no lock of host 1", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const schema = (yield* sql<{ readonly schema: string }>`SELECT current_schema() AS schema`)[0]!.schema
      const control = yield* Control.Control
      const plan = (a: number) =>
        Effect.tap(control.plan({ flowId: "F", input: { a } }), (card) => control.approve(card.approval))
      const one = yield* plan(1)
      const two = yield* plan(2)
      const host2Context = yield* Layer.build(sqlControl(PgDatabase.layer({ url: url!, schema }), { flows }))
      const host2 = Context.get(host2Context, Control.Control)

      const entered = yield* Deferred.make<number>()
      const release = yield* Deferred.make<void>()
      const runtime = yield* ControlRuntime.ControlRuntime
      // Host 1's launch stops inside its transaction, after the run is created, until released.
      const holding: ControlRuntime.Service = {
        ...runtime,
        launch: (...args) =>
          runtime.launch(...args).pipe(
            Effect.zipLeft(Effect.orDie(Effect.flatMap(sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`, (rows) => Deferred.succeed(entered, rows[0]!.pid)))),
            Effect.zipLeft(Deferred.await(release))
          )
      }
      const launcher = yield* Control.make.pipe(Effect.provideService(ControlRuntime.ControlRuntime, holding))
      const run = (c: Control.Service, card: typeof one, key: string) =>
        c.run({ _tag: "Plan", planId: card.planId, digest: card.digest, envelope: card.envelope, idempotencyKey: key })
      const launching = yield* Effect.fork(run(launcher, one, "l1"))
      const heldPid = yield* Deferred.await(entered)

      const second = yield* Effect.fork(run(host2, two, "l2"))
      // Sampled until host 2's launch is done (or is seen waiting): sessions held up by host 1's transaction.
      let blocked = 0
      while (blocked === 0 && Option.isNone(yield* Fiber.poll(second))) {
        const [row] = yield* sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM pg_stat_activity
          WHERE ${heldPid} = ANY(pg_blocking_pids(pid))`
        blocked = Math.max(blocked, Number(row!.n))
        yield* realDelay(2)
      }
      const stillOpen = Option.isNone(yield* Fiber.poll(launching))
      yield* Deferred.succeed(release, undefined)
      expect(yield* Fiber.join(second)).toMatchObject({ _tag: "Accepted", receiptId: "l2" })
      expect(yield* Fiber.join(launching)).toMatchObject({ _tag: "Accepted", receiptId: "l1" })
      expect({ blocked, stillOpen }).toEqual({ blocked: 0, stillOpen: true })
    }).pipe(
      Effect.provide(sqlControl(TestDatabase.layerPostgres(url!), { flows })),
      Effect.scoped
    ), 120_000)
})
