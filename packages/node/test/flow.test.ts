import { describe, expect, it } from "@effect/vitest"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as Journal from "@baton/journal/Journal"
import { Effect, Layer, Schema } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Step from "../src/Step.js"
import { awaitStatus, launch } from "./fixtures/runtimeSupport.js"

const counts = new Map<string, number>()
const bump = (name: string) => Effect.sync(() => counts.set(name, (counts.get(name) ?? 0) + 1))

const abc = Flow.make({
  id: "test.abc",
  description: "three steps",
  version: "1",
  input: Schema.Struct({ n: Schema.Number }),
  handler: ({ n }) =>
    Effect.gen(function*() {
      const a = yield* Step.run("a", Effect.as(bump("a"), n + 1))
      const b = yield* Step.run("b", Effect.as(bump("b"), a * 2))
      const c = yield* Step.run("c", Effect.as(bump("c"), { total: b }))
      return c
    })
})

describe("Flow and NodeRuntime.layerTest", () => {
  it.live("a launched run is driven to completion with its $result", () =>
    Effect.gen(function*() {
      const runId = yield* launch("test.abc", { n: 4 })
      const summary = yield* awaitStatus(runId, ["completed", "failed"])
      expect(summary.status).toBe("completed")
      const attempts = yield* (yield* AttemptStore.AttemptStore).list(runId)
      const result = attempts.find((a) => (a.meta as { name?: string }).name === "$result")
      expect(result?.outcome).toEqual({ value: { total: 10 } })
      expect(attempts.filter((a) => a.state === "completed")).toHaveLength(4)
      const journal = yield* Journal.Journal
      const page = yield* journal.entries({ runId: runId as never, limit: 100 })
      const types = page.entries.map((e) => e.eventType)
      expect(types).toContain("baton.run.driven")
      expect(types.filter((t) => t === "baton.step.completed")).toHaveLength(3)
      expect(types).toContain("baton.run.completed")
      expect([counts.get("a"), counts.get("b"), counts.get("c")]).toEqual([1, 1, 1])
    }).pipe(Effect.provide(NodeRuntime.layerTest({ flows: [abc] }))))

  it("code identity is the version, else a hash of the handler's own text", () => {
    expect(Flow.codeIdentity(abc)).toBe("1")
    const helper = (x: number) => x + 1
    const make = (handler: (input: number) => Effect.Effect<number>) =>
      Flow.make({ id: "f", description: "d", input: Schema.Number, handler })
    const one = make((n) => Effect.succeed(helper(n)))
    const same = make((n) => Effect.succeed(helper(n)))
    const edited = make((n) => Effect.succeed(helper(n) + 1))
    expect(Flow.codeIdentity(one)).toMatch(/^src:[0-9a-f]{64}$/)
    expect(Flow.codeIdentity(one)).toBe(Flow.codeIdentity(same))
    expect(Flow.codeIdentity(edited)).not.toBe(Flow.codeIdentity(one))
    const durable = Flow.toDurableFlow(Flow.make({
      id: "g",
      description: "d",
      version: "2",
      capabilities: ["net", "fs", "net"],
      input: Schema.Number,
      handler: Effect.succeed
    }))
    expect(durable).toMatchObject({
      flowId: "g",
      executionDigest: "2",
      envelope: { capabilities: ["fs", "net"], flows: ["g"], budget: {} }
    })
  })

  it.effect("decode stores the encoded form and names the failing path", () =>
    Effect.gen(function*() {
      const flow = Flow.make({
        id: "h",
        description: "d",
        input: Schema.Struct({ root: Schema.String, when: Schema.DateFromString }),
        handler: () => Effect.void
      })
      const ok = yield* Flow.normalizeInput(flow, { root: "/x", when: "2020-01-01T00:00:00.000Z" })
      expect(ok).toEqual({ root: "/x", when: "2020-01-01T00:00:00.000Z" })
      const bad = yield* Effect.flip(Flow.normalizeInput(flow, { root: 5, when: "x" }))
      expect(bad._tag).toBe("InvalidInput")
      expect(bad.issue).toContain("root")
      const nonJson = Flow.make({
        id: "i",
        description: "d",
        input: Schema.Unknown,
        handler: () => Effect.void
      })
      const refused = yield* Effect.flip(Flow.normalizeInput(nonJson, { f: () => 1 }))
      expect(refused.issue).toBe("input.f: a function is not JSON")
    }))

  it.effect("bad options fail the build naming the field, before anything opens", () =>
    Effect.gen(function*() {
      const build = (options: NodeRuntime.Options) =>
        Effect.flip(Effect.scoped(Layer.build(NodeRuntime.layer({ filename: "/nonexistent-dir/never.db", ...options }))))
      expect(yield* build({ maxRuns: 0 })).toMatchObject({ reason: "invalid_options", field: "maxRuns" })
      expect(yield* build({ pollInterval: "20 seconds" })).toMatchObject({ field: "pollInterval" })
      expect(yield* build({ drainTimeout: "10 seconds", shutdownGrace: "5 seconds" })).toMatchObject({ field: "drainTimeout" })
      expect(yield* build({ shutdownGrace: "2 minutes" })).toMatchObject({ field: "shutdownGrace" })
      expect(yield* build({ takeOverHungOwnersAfter: "30 seconds" })).toMatchObject({ field: "takeOverHungOwnersAfter" })
      expect(yield* build({ mode: "host", readOnly: true })).toMatchObject({ reason: "read_only_host" })
      expect(yield* build({ migrations: [{ namespace: "app", idOffset: 3000, migrations: {} }] }))
        .toMatchObject({ field: "migrations[0].idOffset" })
      expect(yield* build({ flows: [abc, abc] })).toMatchObject({ reason: "duplicate_flow", field: "flows[1].id" })
      // Shapes from untyped callers (a JavaScript host, a --config module) are checked, not assumed.
      expect(yield* build({ flows: 42 as never })).toMatchObject({ reason: "invalid_options", field: "flows" })
      expect(yield* build({ flows: [{ id: "abc" }] as never })).toMatchObject({ field: "flows[0]" })
      expect(yield* build({ migrations: {} as never })).toMatchObject({ field: "migrations" })
      expect(yield* build({ migrations: [null] as never })).toMatchObject({ field: "migrations[0]" })
      expect(yield* build({ principal: "alice" as never })).toMatchObject({ field: "principal" })
      const badVersion = Flow.make({ ...abcDefinition, version: "" })
      expect(yield* build({ flows: [badVersion] })).toMatchObject({ field: "flows[0].version" })
      const badId = Flow.make({ ...abcDefinition, id: "Bad Id" })
      expect(yield* build({ flows: [badId] })).toMatchObject({ field: "flows[0].id" })
    }))
})

const abcDefinition = {
  id: "x",
  description: "d",
  input: Schema.Unknown,
  handler: () => Effect.void
}
