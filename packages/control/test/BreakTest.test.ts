/**
 * Break probes of docs/control.md's promises (idempotency across verbs and
 * runs, replays of parked launches, listing filters), against `TestControl.layer`
 * (the memory runtime) and `SqlControlRuntime` on SQLite and PostgreSQL.
 */
import * as Journal from "@baton/journal/Journal"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Either, Layer } from "effect"
import * as Control from "../src/Control.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import type * as ControlSchema from "../src/ControlSchema.js"
import * as TestControl from "../src/TestControl.js"
import { bob, flows } from "./fixtures/facadeFlows.js"
import { sqlControl } from "./fixtures/facadeLayers.js"
import { count } from "./fixtures/facadeLifecycle.js"
import { sharedPostgres } from "./fixtures/facadePostgres.js"

type Env = Control.Control | ControlRuntime.ControlRuntime | Journal.Journal

const eventTypes = (partition: string) =>
  Effect.flatMap(Journal.Journal, (journal) => journal.entries({ runId: partition, limit: 1000 })).pipe(
    Effect.map((page) => page.entries.map((entry) => entry.eventType))
  )

const snapshot = (partitions: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const runtime = yield* ControlRuntime.ControlRuntime
    const plans = yield* runtime.pagePlanIds({ limit: 500 })
    const runs = yield* runtime.pageRunIds({ limit: 500 })
    const entries: Record<string, ReadonlyArray<string>> = {}
    for (const partition of partitions) entries[partition] = yield* eventTypes(partition)
    const statuses: Record<string, string> = {}
    for (const runId of runs.ids) statuses[runId] = (yield* runtime.getRun(runId)).status
    const commands = yield* runtime.pendingSignals
    return { plans: plans.ids, runs: runs.ids, statuses, entries, commands: commands.map((c) => c.commandId) }
  })

const approvedCard = (key: string) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const card = yield* control.plan({ flowId: "F", input: { key }, idempotencyKey: key })
    yield* control.approve({ ...card.approval, idempotencyKey: `approve-${key}` })
    return card
  })

const launch = (card: ControlSchema.PlanCard, idempotencyKey: string, principal?: { id: string; kind: string }) =>
  Effect.flatMap(Control.Control, (control) =>
    control.run({
      _tag: "Plan",
      planId: card.planId,
      digest: card.digest,
      envelope: card.envelope,
      idempotencyKey,
      ...(principal !== undefined ? { principal } : {})
    }))

const runIdOf = (receipt: ControlSchema.Receipt): string => {
  if ((receipt._tag === "Accepted" || receipt._tag === "AlreadyApplied") && receipt.runId !== undefined) {
    return receipt.runId
  }
  throw new Error(`expected a receipt with a run id, got ${JSON.stringify(receipt)}`)
}

const probes = (label: string, makeLayer: () => Layer.Layer<Env, unknown>) => {
  const test = <A, E>(name: string, body: Effect.Effect<A, E, Env>) =>
    it.effect(name, () => Effect.provide(body, makeLayer()) as Effect.Effect<A, E>)
  const live = <A, E>(name: string, body: Effect.Effect<A, E, Env>) =>
    it.live(name, () => Effect.provide(body, makeLayer()) as Effect.Effect<A, E>)

  describe(`BreakTest (${label})`, () => {
    test("a cancel key reused for another run answers Conflict and leaves that run untouched", Effect.gen(function*() {
      const control = yield* Control.Control
      const card = yield* approvedCard("p")
      const a = runIdOf(yield* launch(card, "ra"))
      const b = runIdOf(yield* launch(card, "rb"))
      const first = yield* control.cancel({ runId: a, idempotencyKey: "c" })
      expect(first).toMatchObject({ _tag: "Terminal", runId: a, status: "cancelled" })
      const before = yield* snapshot([a, b])
      const other = yield* control.cancel({ runId: b, idempotencyKey: "c" })
      expect(other._tag).toBe("Conflict")
      expect(yield* snapshot([a, b])).toEqual(before)
      expect((yield* control.getRun(b)).status).toBe("accepted")
      expect((yield* control.getRun(b)).cancellation).toBeUndefined()
      // Same run, another reason under the key: also a different request.
      const reason = yield* control.cancel({ runId: a, idempotencyKey: "c", reason: "other" })
      expect(reason._tag).toBe("Conflict")
    }))

    test("a signal key: same request replays one command; another payload or run is Conflict, nothing queued", Effect.gen(function*() {
      const control = yield* Control.Control
      const runtime = yield* ControlRuntime.ControlRuntime
      const card = yield* approvedCard("p")
      const a = runIdOf(yield* launch(card, "ra"))
      const b = runIdOf(yield* launch(card, "rb"))
      const signal = { name: "go", payload: { n: 1 } }
      const first = yield* control.signal({ runId: a, signal, idempotencyKey: "s" })
      expect(first).toMatchObject({ _tag: "Accepted", runId: a })
      const again = yield* control.signal({ runId: a, signal, idempotencyKey: "s" })
      expect(again).toMatchObject({ _tag: "AlreadyApplied", runId: a })
      expect((yield* runtime.signalCommands({ runId: a })).length).toBe(1)
      const before = yield* snapshot([a, b])
      const payload = yield* control.signal({ runId: a, signal: { name: "go", payload: { n: 2 } }, idempotencyKey: "s" })
      expect(payload._tag).toBe("Conflict")
      const run = yield* control.signal({ runId: b, signal, idempotencyKey: "s" })
      expect(run._tag).toBe("Conflict")
      expect(yield* snapshot([a, b])).toEqual(before)
      expect((yield* runtime.signalCommands({ runId: a })).map((c) => c.signal)).toEqual([signal])
      expect(yield* runtime.signalCommands({ runId: b })).toEqual([])
    }))

    test("signals queued before a wait keep their admission order per run", Effect.gen(function*() {
      const control = yield* Control.Control
      const runtime = yield* ControlRuntime.ControlRuntime
      const card = yield* approvedCard("p")
      const a = runIdOf(yield* launch(card, "ra"))
      const b = runIdOf(yield* launch(card, "rb"))
      for (const [i, key] of ["z", "a", "m", "b"].entries()) {
        yield* control.signal({ runId: i % 2 === 0 ? a : b, signal: { name: "go", payload: i }, idempotencyKey: key })
      }
      expect((yield* runtime.signalCommands({ runId: a })).map((c) => c.signal.payload)).toEqual([0, 2])
      expect((yield* runtime.signalCommands({ runId: b })).map((c) => c.signal.payload)).toEqual([1, 3])
    }))

    test("run(Resume) shares resume's key: the same request replays, another reason is Conflict", Effect.gen(function*() {
      const control = yield* Control.Control
      const card = yield* approvedCard("p")
      const a = runIdOf(yield* launch(card, "ra"))
      const b = runIdOf(yield* launch(card, "rb"))
      yield* control.resume({ runId: a, idempotencyKey: "k" })
      const replay = yield* control.run({ _tag: "Resume", runId: a, idempotencyKey: "k" })
      expect(replay._tag).toBe("AlreadyApplied")
      const before = yield* snapshot([a, b])
      const reason = yield* control.run({ _tag: "Resume", runId: a, idempotencyKey: "k", reason: "why" })
      expect(reason._tag).toBe("Conflict")
      const other = yield* control.resume({ runId: b, idempotencyKey: "k" })
      expect(other._tag).toBe("Conflict")
      expect(yield* snapshot([a, b])).toEqual(before)
    }))

    test("launch keys are scoped to the principal: another principal's key launches its own run", Effect.gen(function*() {
      const control = yield* Control.Control
      const card = yield* approvedCard("p")
      const mine = runIdOf(yield* launch(card, "x"))
      const bobs = runIdOf(yield* launch(card, "x", bob))
      expect(bobs).not.toBe(mine)
      expect(runIdOf(yield* launch(card, "x", bob))).toBe(bobs)
      expect(runIdOf(yield* launch(card, "x"))).toBe(mine)
      expect((yield* control.getRun(bobs)).launchedBy?.id).toBe("bob")
      const listed = yield* control.list({ _tag: "runs", filters: { principalId: "bob" } })
      expect(listed._tag === "runs" && listed.items.map((r) => r.runId)).toEqual([bobs])
    }))

    test("a key parked on an undecided plan that is then denied fails PlanDenied and writes no run", Effect.gen(function*() {
      const control = yield* Control.Control
      const card = yield* control.plan({ flowId: "F", input: { d: 1 }, idempotencyKey: "p" })
      const parked = yield* launch(card, "k")
      expect(parked).toMatchObject({ _tag: "Parked", status: "waiting-approval" })
      yield* control.deny({ ...card.approval, idempotencyKey: "deny" })
      const before = yield* snapshot([`plan:${card.planId}`])
      const denied = yield* launch(card, "k").pipe(Effect.flip)
      expect(denied._tag).toBe("PlanDenied")
      expect(yield* snapshot([`plan:${card.planId}`])).toEqual(before)
      expect(before.runs).toEqual([])
      // A later approval attempt is AlreadyResolved; the key still launches nothing.
      const approve = yield* control.approve({ ...card.approval, idempotencyKey: "approve" }).pipe(Effect.flip)
      expect(approve._tag).toBe("AlreadyResolved")
      expect((yield* launch(card, "k").pipe(Effect.flip))._tag).toBe("PlanDenied")
    }))

    test("list runs refuses non-integer, negative and unsafe since/until as InvalidInput naming the field", Effect.gen(function*() {
      const control = yield* Control.Control
      yield* approvedCard("p").pipe(Effect.flatMap((card) => launch(card, "r")))
      for (const [field, value] of [["since", 1.5], ["until", -1], ["since", 2 ** 60]] as const) {
        const error = yield* control.list({ _tag: "runs", filters: { [field]: value } }).pipe(Effect.flip)
        expect(error._tag).toBe("InvalidInput")
        expect(error._tag === "InvalidInput" && error.issue).toContain(field)
      }
    }))

    test("runtime queryRuns refuses bad filters, cursors and orders as InvalidInput on every dialect", Effect.gen(function*() {
      const runtime = yield* ControlRuntime.ControlRuntime
      const bad: ReadonlyArray<[Omit<ControlRuntime.RunQuery, "limit">, string]> = [
        [{ filters: { since: -5 } }, "since"],
        [{ filters: { until: 0.5 } }, "until"],
        [{ cursor: { rowSeq: -1, runId: "x" } }, "cursor"],
        [{ cursor: { rowSeq: 2 ** 60, runId: "x" } }, "cursor"],
        [{ order: "sideways" as "newest" }, "order"]
      ]
      for (const [query, field] of bad) {
        const error = yield* runtime.queryRuns({ limit: 10, ...query }).pipe(Effect.flip)
        expect(error._tag).toBe("InvalidInput")
        expect(error._tag === "InvalidInput" && error.issue.startsWith(`${field}:`)).toBe(true)
      }
    }))

    test("a keyed mutation that fails does not spend its key: the same key then serves another request", Effect.gen(function*() {
      const control = yield* Control.Control
      const card = yield* approvedCard("p")
      const missingPlan = { _tag: "Plan" as const, planId: "plan-404", digest: card.digest, envelope: card.envelope }
      expect((yield* control.run({ ...missingPlan, idempotencyKey: "k" }).pipe(Effect.flip))._tag).toBe("PlanNotFound")
      const a = runIdOf(yield* launch(card, "k"))
      expect(
        (yield* control.signal({ runId: "run-404", signal: { name: "go", payload: 1 }, idempotencyKey: "s" }).pipe(Effect.flip))
          ._tag
      ).toBe("RunNotFound")
      expect(yield* control.signal({ runId: a, signal: { name: "go", payload: 2 }, idempotencyKey: "s" })).toMatchObject({
        _tag: "Accepted",
        runId: a
      })
      expect((yield* control.cancel({ runId: "run-404", idempotencyKey: "c" }).pipe(Effect.flip))._tag).toBe("RunNotFound")
      expect(yield* control.cancel({ runId: a, idempotencyKey: "c" })).toMatchObject({ _tag: "Terminal", status: "cancelled" })
      const other = yield* control.plan({ flowId: "F", input: { other: true } })
      const missing = { ...other.approval, target: { ...other.approval.target, planId: "plan-404" } }
      expect((yield* control.approve({ ...missing, idempotencyKey: "a" }).pipe(Effect.flip))._tag).toBe("PlanNotFound")
      expect((yield* control.approve({ ...other.approval, idempotencyKey: "a" }))._tag).toBe("Accepted")
    }))

    live("cancel racing the owner's completion: one outcome, a receipt that agrees, attribution only if cancelled", Effect.gen(function*() {
      const control = yield* Control.Control
      const runtime = yield* ControlRuntime.ControlRuntime
      const card = yield* approvedCard("p")
      for (let i = 0; i < 12; i++) {
        const runId = runIdOf(yield* launch(card, `r${i}`))
        yield* runtime.resume(runId)
        const fence = yield* runtime.claimFence(runId)
        const [receipt, completion] = yield* Effect.all([
          control.cancel({ runId, idempotencyKey: `c${i}`, reason: "race" }),
          Effect.either(Effect.zipRight(Effect.sleep(`${i % 4} millis`), runtime.writeStatus(runId, fence, "completed")))
        ], { concurrency: 2 })
        const run = yield* control.getRun(runId)
        expect(["completed", "cancelled"]).toContain(run.status)
        if (receipt._tag === "Terminal") expect(receipt.status).toBe(run.status)
        if (run.status === "completed") {
          expect(Either.isRight(completion)).toBe(true)
        } else {
          expect(run.cancellation).toMatchObject({ source: "control", reason: "race" })
        }
      }
    }))

    test("the same request spelled differently replays: member order, undefined members, principal stampedAt", Effect.gen(function*() {
      const control = yield* Control.Control
      const first = yield* control.plan({ flowId: "F", input: { a: 1, b: { c: 2, d: 3 } }, idempotencyKey: "p" })
      const reordered = yield* control.plan({
        idempotencyKey: "p",
        input: { b: { d: 3, c: 2 }, a: 1, e: undefined },
        flowId: "F",
        budget: undefined
      })
      expect(reordered).toEqual(first)
      const approval = { ...first.approval, idempotencyKey: "a", principal: { id: "local", kind: "operator", stampedAt: 1 } }
      expect((yield* control.approve(approval))._tag).toBe("Accepted")
      const before = yield* snapshot([`plan:${first.planId}`])
      const replay = yield* control.approve({ ...approval, principal: { kind: "operator", id: "local", stampedAt: 99 }, reason: undefined })
      expect(replay._tag).toBe("AlreadyApplied")
      const again = yield* control.approve({ ...approval, principal: { kind: "operator", id: "local", stampedAt: 99 } })
      expect(again._tag).toBe("AlreadyApplied")
      expect(yield* snapshot([`plan:${first.planId}`])).toEqual(before)
    }))

    test("bad input to every verb is typed and leaves every table row as it was", badInputEverywhere as never)

    test("list plans and flows refuse cursors they never returned", Effect.gen(function*() {
      const control = yield* Control.Control
      for (const cursor of ["-1", "01", "1e3", " 1", ""]) {
        const plans = yield* control.list({ _tag: "plans", cursor }).pipe(Effect.flip)
        expect(plans._tag).toBe("InvalidInput")
        expect(plans._tag === "InvalidInput" && plans.issue).toContain("cursor")
        const flowsPage = yield* control.list({ _tag: "flows", cursor }).pipe(Effect.flip)
        expect(flowsPage._tag).toBe("InvalidInput")
      }
      const runs = yield* control.list({ _tag: "runs", cursor: "" }).pipe(Effect.flip)
      expect(runs._tag).toBe("InvalidInput")
    }))
  })
}

/** Every row of every table (SQLite or PostgreSQL), for "nothing written" comparisons. */
const tables = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const names = yield* sql.onDialectOrElse({
    pg: () =>
      sql<{ readonly name: string }>`SELECT table_name AS name FROM information_schema.tables
        WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`,
    orElse: () => sql<{ readonly name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
  })
  const out: Record<string, string> = {}
  for (const { name } of names) {
    const rows = yield* sql.unsafe<Record<string, unknown>>(`SELECT * FROM "${name}"`)
    out[name] = rows.map((row) => JSON.stringify(row, (_k, v) => typeof v === "bigint" ? String(v) : v)).sort().join("\n")
  }
  return out
}).pipe(Effect.orDie)

/** Bad input to every verb, each after a real request under the same key: typed errors, no row changes. */
const badInputEverywhere = Effect.gen(function*() {
  const control = yield* Control.Control
  const card = yield* approvedCard("p")
  const pending = yield* control.plan({ flowId: "F", input: { pending: true } })
  const runId = runIdOf(yield* launch(card, "r"))
  const before = yield* tables
  const attempts: ReadonlyArray<readonly [string, Effect.Effect<unknown, { readonly _tag: string }, Control.Control>]> = [
    ["plan budget", control.plan({ flowId: "F", input: {}, idempotencyKey: "p2", budget: { tokens: -1 } })],
    ["plan input", control.plan({ flowId: "F", input: { f: () => 1 }, idempotencyKey: "p3" })],
    ["run digest", launch({ ...card, digest: "0".repeat(64) }, "r2")],
    ["run envelope", launch({ ...card, envelope: { ...card.envelope, capabilities: ["*"] } }, "r3")],
    ["run unknown field", control.run({ ...{ _tag: "Plan", planId: card.planId, digest: card.digest, envelope: card.envelope, idempotencyKey: "r4" }, extra: 1 } as never)],
    ["approve digest", control.approve({ ...pending.approval, target: { ...pending.approval.target, digest: "x" } as never, idempotencyKey: "a2" })],
    ["approve reason", control.approve({ ...pending.approval, idempotencyKey: "a3", reason: "" })],
    ["deny scope", control.deny({ ...pending.approval, idempotencyKey: "a4", scope: "forever" as never })],
    ["signal name", control.signal({ runId, signal: { name: "", payload: 1 }, idempotencyKey: "s1" })],
    ["signal payload", control.signal({ runId, signal: { name: "go", payload: { "\u0000": 1 } }, idempotencyKey: "s2" })],
    ["signal key", control.signal({ runId, signal: { name: "go", payload: 1 }, idempotencyKey: "\uD800" })],
    ["cancel reason", control.cancel({ runId, idempotencyKey: "c1", reason: "x".repeat(1001) })],
    ["cancel runId", control.cancel({ runId: "", idempotencyKey: "c2" })],
    ["resume field", control.resume({ runId, idempotencyKey: "u1", allowCodeDrift: "yes" as never })],
    ["steer runId", control.steer({
      runId,
      idempotencyKey: "t1",
      message: { messageId: "m", runId: "other", body: "hi", createdAt: 1, principal: { id: "local", kind: "operator" } } as never
    })],
    ["list tag", control.list({ _tag: "bogus" } as never)]
  ]
  for (const [label, attempt] of attempts) {
    const error = yield* Effect.flip(attempt)
    expect([label, error._tag]).toEqual([label, expect.stringMatching(/^(InvalidInput|PlanDigestMismatch|EnvelopeMismatch)$/)])
  }
  expect(yield* tables).toEqual(before)
})

probes("memory", () => TestControl.layer({ flows }))
probes("SQLite", () => sqlControl(TestDatabase.layer, { flows }))

const url = TestDatabase.postgresTestUrl("control BreakTest")

describe.skipIf(url === undefined)("BreakTest (PostgreSQL, two pools on one schema)", () => {
  const database = sharedPostgres(url!)

  /** Host 1 is the test's context; host 2 is a second pool and facade stack on the same schema. */
  const twoHosts = <A, E>(body: (host2: Control.Service) => Effect.Effect<A, E, Env | SqlClient.SqlClient>) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const schema = (yield* sql<{ readonly schema: string }>`SELECT current_schema() AS schema`)[0]!.schema
      const context = yield* Layer.build(sqlControl(PgDatabase.layer({ url: url!, schema }), { flows }))
      return yield* body(Context.get(context, Control.Control))
    }).pipe(Effect.provide(sqlControl(database(), { flows })), Effect.scoped)

  it.effect("bad input to every verb is typed and leaves every table row as it was", () =>
    Effect.provide(badInputEverywhere, sqlControl(database(), { flows })) as Effect.Effect<void>)

  it.live("one signal key sent by both hosts at once, many times: one command per key, one answer Accepted", () =>
    twoHosts((host2) =>
      Effect.gen(function*() {
        const control = yield* Control.Control
        const runtime = yield* ControlRuntime.ControlRuntime
        const card = yield* approvedCard("p")
        const a = runIdOf(yield* launch(card, "ra"))
        for (let i = 0; i < 8; i++) {
          const input = { runId: a, signal: { name: "go", payload: i }, idempotencyKey: `s${i}` }
          const [one, two] = yield* Effect.all([control.signal(input), host2.signal(input)], { concurrency: 2 })
          expect([one._tag, two._tag].sort()).toEqual(["Accepted", "AlreadyApplied"])
          expect(one).toMatchObject({ runId: a })
          expect(two).toMatchObject({ runId: a })
        }
        const commands = yield* runtime.signalCommands({ runId: a })
        expect(commands.map((c) => c.signal.payload)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
        expect((yield* eventTypes(a)).filter((t) => t === "control.signal.admitted").length).toBe(8)
      })
    ))

  it.live("one key used by both hosts at once for different runs or plans answers Conflict, like a sequential reuse", () =>
    twoHosts((host2) =>
      Effect.gen(function*() {
        const control = yield* Control.Control
        const runtime = yield* ControlRuntime.ControlRuntime
        const card = yield* approvedCard("p")
        const other = yield* approvedCard("q")
        const a = runIdOf(yield* launch(card, "ra"))
        const b = runIdOf(yield* launch(card, "rb"))
        const runsBefore = yield* count("flows_runs")
        for (let i = 0; i < 6; i++) {
          const signal = { name: "go", payload: i }
          const answers = yield* Effect.all([
            control.signal({ runId: a, signal, idempotencyKey: `k${i}` }),
            host2.signal({ runId: b, signal, idempotencyKey: `k${i}` })
          ], { concurrency: 2 })
          expect(answers.map((r) => r._tag).sort()).toEqual(["Accepted", "Conflict"])
          expect(answers.find((r) => r._tag === "Conflict")).toEqual({
            _tag: "Conflict",
            message: `idempotency key k${i} was used for another mutation`
          })
          const launches = yield* Effect.all([launch(card, `l${i}`), Effect.provideService(launch(other, `l${i}`), Control.Control, host2)], {
            concurrency: 2
          })
          expect(launches.map((r) => r._tag).sort()).toEqual(["Accepted", "Conflict"])
        }
        const all = [...(yield* runtime.signalCommands({ runId: a })), ...(yield* runtime.signalCommands({ runId: b }))]
        expect(all.length).toBe(6)
        expect(yield* count("flows_runs")).toBe(runsBefore + 6)
      })
    ))

  it.live("both hosts launch one approved plan under one key and cancel the run under one key at once", () =>
    twoHosts((host2) =>
      Effect.gen(function*() {
        const control = yield* Control.Control
        const card = yield* approvedCard("p")
        const ids = new Set<string>()
        for (let i = 0; i < 5; i++) {
          const input = {
            _tag: "Plan" as const,
            planId: card.planId,
            digest: card.digest,
            envelope: card.envelope,
            idempotencyKey: `r${i}`
          }
          const [one, two] = yield* Effect.all([control.run(input), host2.run(input)], { concurrency: 2 })
          expect([one._tag, two._tag].sort()).toEqual(["Accepted", "AlreadyApplied"])
          expect(runIdOf(one)).toBe(runIdOf(two))
          ids.add(runIdOf(one))
          const cancel = { runId: runIdOf(one), idempotencyKey: `c${i}`, reason: "stop" }
          const [x, y] = yield* Effect.all([control.cancel(cancel), host2.cancel(cancel)], { concurrency: 2 })
          // The one that settles it answers Terminal; the other may run between the recorded request and
          // the settlement (a live peer is settling it) and answer Accepted.
          expect([x, y].filter((r) => r._tag === "Terminal" && r.status === "cancelled").length).toBeGreaterThanOrEqual(1)
          for (const r of [x, y]) expect(["Terminal", "Accepted"]).toContain(r._tag)
          expect((yield* control.getRun(runIdOf(one))).status).toBe("cancelled")
          expect((yield* eventTypes(runIdOf(one))).filter((t) => t === "control.run.cancel-requested").length)
            .toBeLessThanOrEqual(1)
          const run = yield* control.getRun(runIdOf(one))
          expect(run.cancellation).toMatchObject({ source: "control", reason: "stop" })
        }
        expect(ids.size).toBe(5)
        expect(yield* count("flows_runs")).toBe(5)
      })
    ))

  it.live("both hosts approve one plan under one key at once: one decision, the other a replay", () =>
    twoHosts((host2) =>
      Effect.gen(function*() {
        const control = yield* Control.Control
        for (let i = 0; i < 4; i++) {
          const card = yield* control.plan({ flowId: "F", input: { i }, idempotencyKey: `p${i}` })
          const payload = { ...card.approval, idempotencyKey: `a${i}`, reason: "ok" }
          const [one, two] = yield* Effect.all([
            Effect.either(control.approve(payload)),
            Effect.either(host2.approve(payload))
          ], { concurrency: 2 })
          const answers = [one, two].map((e) => Either.isRight(e) ? e.right._tag : e.left._tag).sort()
          expect(answers).toEqual(["Accepted", "AlreadyApplied"])
          expect((yield* eventTypes(`plan:${card.planId}`)).filter((t) => t === "control.approval.approved").length).toBe(1)
        }
      })
    ))
})
