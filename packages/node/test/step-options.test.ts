/**
 * node.md 5.2–5.3 edges of `Step.run`: a result that is not JSON fails the run and ends its attempt
 * `failed` (as a non-JSON checkpoint does); options of the wrong shape fail the run with
 * `StepMisuse` `invalid_options` naming the option, before the step writes anything; a `summarize`
 * detail that is not JSON or exceeds 1 KiB is left out of `baton.step.completed` with a warning.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Layer, Logger, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import type * as Run from "../src/Run.js"
import * as Step from "../src/Step.js"
import { awaitStatus, expectCompleted, launch } from "./fixtures/runtimeSupport.js"

const fast = { pollInterval: "100 millis" } as const

const simple = (id: string, handler: (input: unknown) => Effect.Effect<unknown, unknown, Run.Run>) =>
  Flow.make({ id, description: id, version: "1", input: Schema.Unknown, handler })

const attemptsOf = (runId: string, name: string) =>
  Effect.flatMap(AttemptStore.AttemptStore, (store) => store.list(runId)).pipe(
    Effect.map((attempts) =>
      attempts.filter((a) => (a.meta as { name?: string }).name === name).sort((x, y) => x.attempt - y.attempt)
    )
  )

const entriesOf = (runId: string) =>
  Effect.flatMap(Journal.Journal, (journal) => journal.entries({ runId: runId as never, limit: 1000 })).pipe(
    Effect.map((page) => page.entries)
  )

/** Launch `flowId`, expect it `failed`, answer the stored `$result` error message. */
const failedWith = (flowId: string) =>
  Effect.gen(function*() {
    const runId = yield* launch(flowId, null)
    expect((yield* awaitStatus(runId, ["failed", "completed"])).status).toBe("failed")
    const [result] = yield* attemptsOf(runId, "$result")
    return { runId, message: (result?.error as { message: string }).message }
  })

const notJson: ReadonlyArray<readonly [string, unknown]> = [["bigint", 10n], ["date", new Date(0)], ["nan", NaN]]

describe("Step.run results and options", () => {
  it.live("a result that is not JSON fails the run with result_not_json and ends the attempt failed", () =>
    Effect.gen(function*() {
      for (const [id] of notJson) {
        const { message, runId } = yield* failedWith(`result-${id}`)
        expect(message).toContain("StepMisuse result_not_json")
        const attempts = yield* attemptsOf(runId, "b")
        expect(attempts.map((a) => a.state)).toEqual(["failed"])
        expect((attempts[0]?.error as { message: string }).message).toContain("the result of step b is not JSON")
        expect((yield* entriesOf(runId)).map((e) => e.eventType)).toContain("baton.step.failed")
      }
      // The same as a checkpoint that is not JSON.
      const { runId } = yield* failedWith("checkpoint-bigint")
      expect((yield* attemptsOf(runId, "b")).map((a) => a.state)).toEqual(["failed"])
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [
        ...notJson.map(([id, value]) => simple(`result-${id}`, () => Step.run("b", Effect.succeed(value)))),
        simple("checkpoint-bigint", () => Step.run("b", Step.checkpoint(10n as never)))
      ]
    }))))

  it.live("a result whose schema does not encode ends the attempt failed", () =>
    Effect.gen(function*() {
      const { message, runId } = yield* failedWith("encode")
      expect(message).toContain("does not encode with its schema")
      expect((yield* attemptsOf(runId, "b")).map((a) => a.state)).toEqual(["failed"])
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [simple("encode", () => Step.run("b", Effect.succeed(-1), { result: Schema.NonNegative as never }))]
    }))))

  it.live("a commit that fails (not storage trouble) fails the run and ends the attempt failed", () =>
    Effect.gen(function*() {
      const { message, runId } = yield* failedWith("commit-fails")
      expect(message).toContain("SqlError")
      expect((yield* attemptsOf(runId, "b")).map((a) => a.state)).toEqual(["failed"])
      const types = (yield* entriesOf(runId)).map((e) => e.eventType)
      expect(types).toContain("baton.step.failed")
      expect(types).not.toContain("baton.step.completed")
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [simple("commit-fails", () =>
        Step.run("b", Effect.succeed(1), {
          commit: () => Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO missing_table VALUES (1)`)
        }))]
    }))))

  it.live("bad options fail the run with invalid_options naming the option; the step writes nothing", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, string]> = [
        ["times-negative", "step b: option retry.times must be a non-negative integer (got -1)"],
        ["times-fraction", "step b: option retry.times must be a non-negative integer (got 1.5)"],
        ["times-nan", "step b: option retry.times must be a non-negative integer (got NaN)"],
        ["delay-bad", "step b: option retry.delay must be a finite, non-negative Duration (got \"soon\")"],
        ["delay-negative", "step b: option retry.delay must be a finite, non-negative Duration (got -5)"],
        ["delay-infinite", "step b: option retry.delay must be a finite, non-negative Duration (got Duration(Infinity))"],
        ["summarize-value", "step b: option summarize must be a function (got \"x\")"],
        ["commit-value", "step b: option commit must be a function (got 1)"],
        ["result-value", "step b: option result must be a Schema (got an object)"]
      ]
      for (const [id, expected] of cases) {
        const { message, runId } = yield* failedWith(id)
        expect(message).toContain("StepMisuse invalid_options")
        expect(message).toContain(expected)
        expect(yield* attemptsOf(runId, "b")).toEqual([])
      }
      expect(ran).toBe(0)
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [
        bad("times-negative", { retry: { times: -1 } }),
        bad("times-fraction", { retry: { times: 1.5 } }),
        bad("times-nan", { retry: { times: NaN } }),
        bad("delay-bad", { retry: { times: 1, delay: "soon" } }),
        bad("delay-negative", { retry: { times: 1, delay: -5 } }),
        bad("delay-infinite", { retry: { times: 1, delay: Duration.infinity } }),
        bad("summarize-value", { summarize: "x" }),
        bad("commit-value", { commit: 1 }),
        bad("result-value", { result: {} })
      ]
    }))))

  it.live("a summary that is not JSON or over 1 KiB is left out with a warning; a fitting one is kept", () => {
    const warnings: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel._tag === "Warning") warnings.push(String(Array.isArray(message) ? message.join(" ") : message))
    })
    return Effect.gen(function*() {
      const runId = yield* launch("summaries", null)
      yield* expectCompleted(runId)
      const completed = (yield* entriesOf(runId)).filter((e) => e.eventType === "baton.step.completed")
      const detailOf = (step: string) => (completed.find((e) => (e.payload as { step: string }).step === step)?.payload as {
        detail?: unknown
      }).detail
      expect(detailOf("big")).toBeUndefined()
      expect(detailOf("date")).toBeUndefined()
      expect(detailOf("fits")).toEqual({ files: 3 })
      // 1 KiB counts UTF-8 bytes: 600 "é" are 602 characters of JSON but 1,202 bytes.
      expect(detailOf("accents")).toBeUndefined()
      expect(warnings).toContainEqual(
        "the summary of step big must be at most 1024 bytes of JSON (got 2002); baton.step.completed carries no detail"
      )
      expect(warnings).toContainEqual(
        "the summary of step date must be JSON (summary: a Date object is not JSON); baton.step.completed carries no detail"
      )
      expect(warnings).toContainEqual(
        "the summary of step accents must be at most 1024 bytes of JSON (got 1202); baton.step.completed carries no detail"
      )
      expect(warnings.filter((w) => w.includes("step fits"))).toEqual([])
    }).pipe(Effect.provide(NodeRuntime.layerTest({
      ...fast,
      flows: [simple("summaries", () =>
        Effect.gen(function*() {
          yield* Step.run("big", Effect.succeed(1), { summarize: () => "x".repeat(2000) })
          yield* Step.run("date", Effect.succeed(2), { summarize: () => new Date(0) as never })
          yield* Step.run("accents", Effect.succeed(3), { summarize: () => "é".repeat(600) })
          yield* Step.run("fits", Effect.succeed(4), { summarize: () => ({ files: 3 }) })
        }))]
    }).pipe(Layer.provide(Logger.replace(Logger.defaultLogger, logger)))))
  })
})

let ran = 0
const bad = (id: string, options: unknown) =>
  simple(id, () => Step.run("b", Effect.sync(() => ++ran), options as never))
