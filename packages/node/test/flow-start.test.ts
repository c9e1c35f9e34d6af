import { describe, expect, it } from "@effect/vitest"
import * as Control from "@baton/control/Control"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { Duration, Effect, Option, Schedule, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Step from "../src/Step.js"

class Refused extends Schema.TaggedError<Refused>()("Refused", { why: Schema.String }) {}

const double = Flow.make({
  id: "test.double",
  description: "doubles n in one step",
  version: "1",
  input: Schema.Struct({ n: Schema.Number, when: Schema.optional(Schema.DateFromString) }),
  output: Schema.Struct({ doubled: Schema.Number }),
  handler: ({ n }) => Step.run("double", Effect.succeed({ doubled: n * 2 }))
})

const refuse = Flow.make({
  id: "test.refuse",
  description: "fails with a typed error",
  version: "1",
  input: Schema.Struct({ why: Schema.String }),
  error: Refused,
  // No annotation: a flow that never succeeds (output `never`) fits the catalog as it is.
  handler: ({ why }) => Effect.fail(new Refused({ why }))
})

const plainFailure = Flow.make({
  id: "test.plain-failure",
  description: "fails with a plain object",
  version: "1",
  input: Schema.Null,
  handler: () => Effect.fail({ code: 7, reason: "plain" })
})

const huge = Flow.make({
  id: "test.huge",
  description: "returns n characters of text",
  version: "1",
  input: Schema.Struct({ n: Schema.Number, char: Schema.String }),
  handler: ({ char, n }) => Effect.succeed(char.repeat(n))
})

const gated = Flow.make({
  id: "test.gated",
  description: "needs approval",
  version: "1",
  approval: "required",
  input: Schema.Number,
  handler: Effect.succeed
})

const never = Flow.make({
  id: "test.never",
  description: "waits forever",
  version: "1",
  input: Schema.Null,
  handler: () => Effect.asVoid(Effect.never)
})

let flakyCalls = 0
let prepared = 0
const flaky = Flow.make({
  id: "test.flaky",
  description: "fails its first two attempts after a completed step",
  version: "1",
  input: Schema.Struct({ failures: Schema.Number }),
  retry: { maxAttempts: 3, initial: "50 millis", factor: 2, jitter: false },
  handler: ({ failures }) =>
    Effect.gen(function*() {
      yield* Step.run("prepare", Effect.sync(() => ++prepared))
      flakyCalls++
      if (flakyCalls <= failures) return yield* Effect.fail(new Refused({ why: `attempt ${flakyCalls}` }))
      return flakyCalls
    })
})

let stepTries = 0
const paced = Flow.make({
  id: "test.paced",
  description: "a step retried by a Schedule that allows one retry",
  version: "1",
  input: Schema.Null,
  handler: (): Effect.Effect<string, Refused, Flow.Services> =>
    Step.run(
      "always-fails",
      Effect.suspend(() => {
        stepTries++
        return Effect.fail(new Refused({ why: `try ${stepTries}` })) as Effect.Effect<string, Refused>
      }),
      { retry: { times: 5, schedule: Schedule.recurs(1).pipe(Schedule.addDelay(() => "10 millis")) } }
    )
})

const tagged = Flow.make({
  id: "test.tagged",
  description: "an optional tag and free text, echoed",
  version: "1",
  input: Schema.Struct({ s: Schema.String, tag: Schema.optional(Schema.String), nested: Schema.optional(Schema.Unknown) }),
  handler: ({ s }) => Effect.succeed(s)
})

const leaky = Flow.make({
  id: "test.leaky",
  description: "returns a result its output schema refuses",
  version: "1",
  input: Schema.Null,
  output: Schema.Struct({ token: Schema.Literal("public") }),
  handler: () => Effect.succeed({ token: "hunter2-SECRET-token" } as never)
})

const runtime = NodeRuntime.layerTest({ flows: [double, refuse, gated, never, flaky, paced, tagged, leaky, plainFailure, huge] })

const retryingFacts = (runId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ payload_json: string }>`SELECT payload_json FROM flows_journal_events
      WHERE run_id = ${runId} AND event_type = 'baton.run.retrying' ORDER BY seq`
    return rows.map((r) => JSON.parse(r.payload_json) as { attempt: number; availableAtMs: number; error: { message: string } })
  })

const counts = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [plans] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM control_plans`
  const [runs] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM flows_runs`
  return { plans: Number(plans!.n), runs: Number(runs!.n) }
})

describe("Flow.start and Flow.await", () => {
  it.live("start runs without a plan decision; await answers the decoded result", () =>
    Effect.gen(function*() {
      const handle = yield* Flow.start(double, { n: 21 })
      expect(handle.created).toBe(true)
      const outcome = yield* Flow.await(handle, { timeout: "20 seconds" })
      expect(outcome).toEqual(Flow.Outcome.Completed({ runId: handle.runId, value: { doubled: 42 } }))
      const summary = yield* (yield* Control.Control).getRun(handle.runId)
      expect(summary.status).toBe("completed")
      expect(summary.result).toEqual({ doubled: 42 })
    }).pipe(Effect.provide(runtime)))

  it.live("a typed failure is answered decoded by the flow's error schema, and getRun carries it", () =>
    Effect.gen(function*() {
      const handle = yield* Flow.start(refuse, { why: "no" })
      const outcome = yield* Flow.await(handle, { timeout: "20 seconds" })
      expect(Flow.Outcome.$is("Failed")(outcome)).toBe(true)
      if (outcome._tag !== "Failed") return
      expect(outcome.error).toBeInstanceOf(Refused)
      expect((outcome.error as Refused).why).toBe("no")
      const summary = yield* (yield* Control.Control).getRun(handle.runId)
      expect(summary.status).toBe("failed")
      expect(summary.error).toMatchObject({ tag: "Refused" })
    }).pipe(Effect.provide(runtime)))

  it.live("a plain object failure is recorded with what it holds, not [object Object]", () =>
    Effect.gen(function*() {
      const outcome = yield* Flow.await(yield* Flow.start(plainFailure, null), { timeout: "20 seconds" })
      expect(outcome._tag).toBe("Failed")
      if (outcome._tag === "Failed") expect(outcome.error).toEqual({ message: `{"code":7,"reason":"plain"}` })
    }).pipe(Effect.provide(runtime)))

  it.live("the 1 MiB result bound counts UTF-8 bytes: 400,000 euro signs (1.2 MB) fail, 300,000 (0.9 MB) complete", () =>
    Effect.gen(function*() {
      const over = yield* Flow.await(yield* Flow.start(huge, { n: 400_000, char: "€" }), { timeout: "30 seconds" })
      expect(over._tag).toBe("Failed")
      if (over._tag === "Failed") expect(over.error).toMatchObject({ message: "the run's result exceeds 1 MiB" })
      const under = yield* Flow.await(yield* Flow.start(huge, { n: 300_000, char: "€" }), { timeout: "30 seconds" })
      expect(under._tag).toBe("Completed")
    }).pipe(Effect.provide(runtime)))

  it.live("a Schedule given as a run's retry is refused naming retry, and nothing is written", () =>
    Effect.gen(function*() {
      const before = yield* counts
      const error = yield* Effect.flip(Flow.start(double, { n: 1 }, { retry: Schedule.recurs(2) as never }))
      expect(error).toMatchObject({ _tag: "InvalidInput" })
      expect((error as { issue?: string }).issue).toMatch(/^retry: must be a retry policy .*not a Schedule/)
      expect(yield* counts).toEqual(before)
    }).pipe(Effect.provide(runtime)))

  it.live("a cancelled run answers Cancelled with its attribution; a bare run id awaits too", () =>
    Effect.gen(function*() {
      const control = yield* Control.Control
      const handle = yield* Flow.start(never, null)
      yield* control.cancel({ runId: handle.runId, idempotencyKey: "stop-it", reason: "test over" })
      const outcome = yield* Flow.await(handle.runId, { timeout: "20 seconds" })
      expect(outcome._tag).toBe("Cancelled")
      if (outcome._tag === "Cancelled") expect(outcome.attribution?.reason).toBe("test over")
    }).pipe(Effect.provide(runtime)))

  it.live("the same idempotency key and input answer the same run; other input is refused and writes nothing", () =>
    Effect.gen(function*() {
      const first = yield* Flow.start(double, { n: 1 }, { idempotencyKey: "k-1" })
      const again = yield* Flow.start(double, { n: 1 }, { idempotencyKey: "k-1" })
      expect(again.runId).toBe(first.runId)
      expect(again.created).toBe(false)
      const before = yield* counts
      const conflict = yield* Effect.flip(Flow.start(double, { n: 2 }, { idempotencyKey: "k-1" }))
      expect(conflict._tag).toBe("IdempotencyConflict")
      expect(conflict.message).toBe("idempotencyKey: was used for a start of another flow, input or placement (queue, priority, retry, parent)")
      expect(yield* counts).toEqual(before)
    }).pipe(Effect.provide(runtime)))

  it.live("bad input, bad options and an approval-only flow are refused with typed errors and write nothing", () =>
    Effect.gen(function*() {
      const before = yield* counts
      const badInput = yield* Effect.flip(Flow.start(double, { n: "x" } as never))
      expect(badInput._tag).toBe("InvalidInput")
      expect(badInput.message).toContain("input")
      expect(badInput.message).not.toContain("\"x\"")
      const badQueue = yield* Effect.flip(Flow.start(double, { n: 1 }, { queue: "Not A Queue" }))
      expect(badQueue.message).toContain("queue: must be 1 to 128 characters")
      const badPriority = yield* Effect.flip(Flow.start(double, { n: 1 }, { priority: 1.5 }))
      expect(badPriority.message).toContain("priority: must be an integer")
      const badRetry = yield* Effect.flip(Flow.start(double, { n: 1 }, { retry: { maxAttempts: 0 } }))
      expect(badRetry.message).toContain("retry.maxAttempts")
      const both = yield* Effect.flip(Flow.start(double, { n: 1 }, { delay: "1 second", availableAt: 5 }))
      expect(both.message).toContain("availableAt")
      const nested = yield* Effect.flip(Flow.start(double, { n: "SECRET-not-a-number" } as never))
      expect(nested.message).toBe("input.n: must be number")
      expect(nested.message).not.toContain("SECRET")
      // A union names every member it tried, never the value.
      const union = yield* Effect.flip(Flow.start(double, { n: 1, when: 5 } as never))
      expect(union.message).toBe("input.when: must be a valid date or undefined")
      const top = yield* Effect.flip(Flow.start(double, "SECRET-TOPLEVEL" as never))
      expect(top.message).not.toContain("SECRET")
      const badDuration = yield* Effect.flip(Flow.start(double, { n: 1 }, { retry: { maxAttempts: 3, initial: "bogus" as never } }))
      expect(badDuration.message).toBe("retry.initial: must be a finite, non-negative duration")
      const negative = yield* Effect.flip(Flow.start(double, { n: 1 }, { delay: -1000 }))
      expect(negative.message).toBe("delay: must be a finite, non-negative duration")
      const orphan = yield* Effect.flip(Flow.start(double, { n: 1 }, { parentRunId: "run-999999" }))
      expect(orphan.message).toBe("parentRunId: names no run")
      const gate = yield* Effect.flip(Flow.start(gated, 1))
      expect(gate._tag).toBe("ApprovalRequired")
      const many = yield* Effect.flip(Flow.startMany(double, [{ n: 1 }, { n: Number.NaN as never }, { n: 3 }]))
      expect(many._tag).toBe("InvalidInput")
      expect(yield* counts).toEqual(before)
    }).pipe(Effect.provide(runtime)))

  it.live("an optional member given as undefined is absent; a value that is not JSON is named by its path, not echoed", () =>
    Effect.gen(function*() {
      const handle = yield* Flow.start(tagged, { s: "a", tag: undefined })
      expect(yield* Flow.await(handle, { timeout: "10 seconds" })).toEqual(Flow.Outcome.Completed({ runId: handle.runId, value: "a" }))
      const before = yield* counts
      const nan = yield* Effect.flip(Flow.start(tagged, { s: "b", nested: { x: Number.NaN } }))
      expect(nan.message).toBe("input.nested.x: NaN is not JSON")
      const nul = yield* Effect.flip(Flow.start(tagged, { s: "SECRET\u0000" }))
      expect(nul._tag).toBe("InvalidInput")
      expect(nul.message.startsWith("input.s: ")).toBe(true)
      expect(nul.message).not.toContain("SECRET")
      const many = yield* Effect.flip(Flow.startMany(tagged, [{ s: "ok" }, { s: "x\u0000" }]))
      expect(many.message.startsWith("inputs[1].s: ")).toBe(true)
      expect(yield* counts).toEqual(before)
    }).pipe(Effect.provide(runtime)))

  it.live("a result the output schema refuses fails the run naming the path and rule, never the value", () =>
    Effect.gen(function*() {
      const handle = yield* Flow.start(leaky, null)
      const outcome = yield* Flow.await(handle, { timeout: "10 seconds" })
      expect(outcome._tag).toBe("Failed")
      const error = (outcome as { readonly error: { readonly message: string } }).error
      expect(error.message).toContain("does not encode with the flow's output schema (result.token: ")
      expect(JSON.stringify(error)).not.toContain("SECRET")
      const summary = yield* (yield* Control.Control).getRun(handle.runId)
      expect(JSON.stringify(summary)).not.toContain("SECRET")
    }).pipe(Effect.provide(runtime)))

  it.live("await refuses a timeout or poll interval that is not a finite duration; startMany refuses what is not a list", () =>
    Effect.gen(function*() {
      const handle = yield* Flow.start(double, { n: 4 })
      const word = yield* Effect.flip(Flow.await(handle, { timeout: "banana" as never }))
      expect(word.message).toBe("timeout: must be a finite duration of at least 0 ms")
      const negative = yield* Effect.flip(Flow.await(handle, { timeout: -5 }))
      expect(negative._tag).toBe("InvalidInput")
      const poll = yield* Effect.flip(Flow.await(handle, { pollInterval: Number.NaN }))
      expect(poll.message).toBe("pollInterval: must be a finite duration of at least 1 ms")
      expect((yield* Flow.await(handle, { timeout: "10 seconds" }))._tag).toBe("Completed")
      // An ended run answers even with no time to wait.
      expect((yield* Flow.await(handle, { timeout: 0 }))._tag).toBe("Completed")
      const pending = yield* Flow.start(double, { n: 5 }, { delay: "1 hour" })
      expect((yield* Effect.flip(Flow.await(pending, { timeout: 0 })))._tag).toBe("AwaitTimeout")
      const before = yield* counts
      // Reading the input throws (a getter): a typed refusal naming the field, nothing written, nothing thrown.
      const trap = Object.defineProperty({}, "n", {
        enumerable: true,
        get: () => {
          throw new Error("secret-value-7")
        }
      }) as { n: number }
      const refused = yield* Effect.flip(Flow.start(double, trap))
      expect(refused._tag).toBe("InvalidInput")
      expect(refused.message).toBe("input: could not be read (reading it threw)")
      const many = yield* Effect.flip(Flow.startMany(double, [{ n: 1 }, trap]))
      expect(many.message).toContain("inputs[1]")
      expect(many.message).not.toContain("secret-value-7")
      const notList = yield* Effect.flip(Flow.startMany(double, 5 as never))
      expect(notList.message).toBe("inputs: must be an iterable of inputs")
      const oneKey = yield* Effect.flip(Flow.startMany(double, [{ n: 1 }], { idempotencyKey: "k" } as never))
      expect(oneKey.message).toContain("idempotencyKey: is not accepted by startMany")
      expect(yield* counts).toEqual(before)
    }).pipe(Effect.provide(runtime)))

  it.live("startMany writes every run in one call and each completes", () =>
    Effect.gen(function*() {
      const handles = yield* Flow.startMany(double, Array.from({ length: 20 }, (_, n) => ({ n })))
      expect(new Set(handles.map((h) => h.runId)).size).toBe(20)
      const outcomes = yield* Effect.forEach(handles, (h) => Flow.await(h, { timeout: "30 seconds" }), { concurrency: 20 })
      expect(outcomes.map((o) => (o._tag === "Completed" ? o.value.doubled : -1))).toEqual(handles.map((_, n) => n * 2))
    }).pipe(Effect.provide(runtime)), 60_000)

  it.live("startMany of 1,000 runs writes them in a few statements per chunk and a host completes every one", () =>
    Effect.gen(function*() {
      const sent: Array<string> = []
      const handles = yield* Statement.withTransformer(
        Flow.startMany(double, Array.from({ length: 1_000 }, (_, n) => ({ n }))),
        (self) => {
          sent.push(self.compile()[0])
          return Effect.succeed(self)
        }
      )
      expect(new Set(handles.map((h) => h.runId)).size).toBe(1_000)
      // The journal's accepted entries apart (two statements per run on SQLite), a dozen or so for the batch.
      expect(sent.filter((text) => !/\bflows_journal_(events|heads)\b/.test(text)).length).toBeLessThanOrEqual(16)
      const outcomes = yield* Effect.forEach(handles, (h) => Flow.await(h, { timeout: "360 seconds" }), { concurrency: 50 })
      expect(outcomes.map((o) => (o._tag === "Completed" ? o.value.doubled : -1))).toEqual(handles.map((_, n) => n * 2))
    }).pipe(Effect.provide(runtime)), 420_000)

  it.live("a delayed run waits until it is available", () =>
    Effect.gen(function*() {
      const started = Date.now()
      const handle = yield* Flow.start(double, { n: 5 }, { delay: "1500 millis" })
      const outcome = yield* Flow.await(handle, { timeout: "20 seconds" })
      expect(outcome._tag).toBe("Completed")
      expect(Date.now() - started).toBeGreaterThanOrEqual(1500)
    }).pipe(Effect.provide(runtime)))

  it.live("await times out with a typed error and changes nothing", () =>
    Effect.gen(function*() {
      const handle = yield* Flow.start(never, null)
      const error = yield* Effect.flip(Flow.await(handle, { timeout: "200 millis" }))
      expect(error._tag).toBe("AwaitTimeout")
      expect((yield* (yield* Control.Control).getRun(handle.runId)).status).not.toBe("cancelled")
    }).pipe(Effect.provide(runtime)))

  it.live("a failed run is retried per its policy, keeps its completed steps, and records every attempt's error", () =>
    Effect.gen(function*() {
      flakyCalls = 0
      prepared = 0
      const handle = yield* Flow.start(flaky, { failures: 2 })
      const outcome = yield* Flow.await(handle, { timeout: "20 seconds" })
      expect(outcome).toEqual(Flow.Outcome.Completed({ runId: handle.runId, value: 3 }))
      expect(flakyCalls).toBe(3)
      expect(prepared).toBe(1)
      const facts = yield* retryingFacts(handle.runId)
      expect(facts.map((f) => f.attempt)).toEqual([1, 2])
      expect(facts.map((f) => f.error.message.includes(`attempt ${f.attempt}`))).toEqual([true, true])
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ attempt: number }>`SELECT attempt FROM control_runs WHERE run_id = ${handle.runId}`
      expect(Number(row!.attempt)).toBe(3)
    }).pipe(Effect.provide(runtime)))

  it.live("a host claims a run put back for a retry at its time, not at its next sweep", () =>
    Effect.gen(function*() {
      flakyCalls = 0
      // Sweeps 10 s apart: two retries found by sweeps alone would take longer than the await allows.
      const handle = yield* Flow.start(flaky, { failures: 2 }, { retry: { maxAttempts: 3, initial: "50 millis", jitter: false } })
      const outcome = yield* Flow.await(handle, { timeout: "8 seconds" })
      expect(outcome).toEqual(Flow.Outcome.Completed({ runId: handle.runId, value: 3 }))
      expect(flakyCalls).toBe(3)
    }).pipe(Effect.provide(NodeRuntime.layerTest({ flows: [flaky], pollInterval: "10 seconds" }))))

  it.live("after the last attempt the run is failed with every attempt's error in its history", () =>
    Effect.gen(function*() {
      flakyCalls = 0
      const handle = yield* Flow.start(flaky, { failures: 10 }, { retry: { maxAttempts: 2, initial: "20 millis", jitter: false } })
      const outcome = yield* Flow.await(handle, { timeout: "20 seconds" })
      expect(outcome._tag).toBe("Failed")
      expect(flakyCalls).toBe(2)
      const facts = yield* retryingFacts(handle.runId)
      expect(facts).toHaveLength(1)
      expect(facts[0]!.error.message).toContain("attempt 1")
      const summary = yield* (yield* Control.Control).getRun(handle.runId)
      expect(summary.error).toMatchObject({ tag: "Refused" })
      expect((summary.error as { message: string }).message).toContain("attempt 2")
    }).pipe(Effect.provide(runtime)))

  it.live("a step's retry schedule paces its attempts and ends them before times", () =>
    Effect.gen(function*() {
      stepTries = 0
      const outcome = yield* Flow.await(yield* Flow.start(paced, null), { timeout: "20 seconds" })
      expect(outcome._tag).toBe("Failed")
      expect(stepTries).toBe(2)
    }).pipe(Effect.provide(runtime)))

  it.effect("the retry schedule backs off exponentially, capped, and stops after the last attempt", () =>
    Effect.gen(function*() {
      const policy = Flow.retryPolicy({ maxAttempts: 5, initial: "1 second", factor: 2, max: "5 seconds", jitter: false })
      const delays = yield* Effect.forEach([1, 2, 3, 4, 5], (n) => Flow.retryDelay(policy, n, 0))
      expect(delays.map((d) => Option.map(d, Duration.toMillis))).toEqual([
        Option.some(1000),
        Option.some(2000),
        Option.some(4000),
        Option.some(5000),
        Option.none()
      ])
      // retrySchedule takes a flow's Retry as it is, as well as its stored form.
      const direct = yield* Schedule.run(
        Flow.retrySchedule({ maxAttempts: 4, initial: "1 second", factor: 3, jitter: false }),
        0,
        [1, 2, 3, 4, 5]
      )
      expect(Array.from(direct, Duration.toMillis).slice(0, 3)).toEqual([1000, 3000, 9000])
      const jittered = Flow.retryPolicy({ maxAttempts: 3, initial: "1 second" })
      const d = Option.getOrThrow(yield* Flow.retryDelay(jittered, 1, 0))
      expect(Duration.toMillis(d)).toBeGreaterThanOrEqual(500)
      expect(Duration.toMillis(d)).toBeLessThan(1500)
    }))
})
