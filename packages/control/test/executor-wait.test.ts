import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ControlExecutor from "../src/ControlExecutor.js"

describe("ControlExecutor wait tokens", () => {
  it("waitToken is base64 of the UTF-8 JSON triple", () => {
    const token = ControlExecutor.waitToken("F", "run-1", "go", 2)
    const decoded = new TextDecoder().decode(Uint8Array.from(atob(token), (c) => c.charCodeAt(0)))
    expect(JSON.parse(decoded)).toEqual(["F", "run-1", "WaitFor/go#2"])
  })

  it("waitPointOf reads back the name and a positive attempt, also for non-ASCII names", () => {
    expect(ControlExecutor.waitPointOf(ControlExecutor.waitToken("F", "r", "go", 3))).toEqual({ name: "go", attempt: 3 })
    expect(ControlExecutor.waitPointOf(ControlExecutor.waitToken("F", "r", "go"))).toEqual({ name: "go" })
    expect(ControlExecutor.waitPointOf(ControlExecutor.waitToken("F", "r", "geh – weiter ✓", 1))).toEqual({
      name: "geh – weiter ✓",
      attempt: 1
    })
  })

  it("a suffix that is not a positive safe integer stays part of the name", () => {
    const encode = (point: string) => btoa(JSON.stringify(["F", "r", point]))
    expect(ControlExecutor.waitPointOf(encode("WaitFor/go#0"))).toEqual({ name: "go#0" })
    expect(ControlExecutor.waitPointOf(encode("WaitFor/go#x"))).toEqual({ name: "go#x" })
    expect(ControlExecutor.waitPointOf(encode("WaitFor/go#99999999999999999999"))).toEqual({
      name: "go#99999999999999999999"
    })
  })

  it("undecodable tokens name nothing", () => {
    expect(ControlExecutor.waitPointOf("%%%")).toEqual({})
    expect(ControlExecutor.waitPointOf(btoa("not json"))).toEqual({})
    expect(ControlExecutor.waitPointOf(btoa(JSON.stringify(["F", "r", "Sleep/x"])))).toEqual({})
    expect(ControlExecutor.waitPointOf(btoa(JSON.stringify({ a: 1 })))).toEqual({})
  })

  it.effect("pendingWaitOf keeps approval and event waits with a token and digests the token", () =>
    Effect.gen(function*() {
      const token = ControlExecutor.waitToken("F", "run-1", "go", 1)
      const wait = yield* ControlExecutor.pendingWaitOf({
        runId: "run-1",
        flowId: "F",
        reason: "event",
        token,
        request: { q: 1 },
        createdAt: 7
      })
      expect(wait).toMatchObject({ runId: "run-1", flowId: "F", reason: "event", token, name: "go", attempt: 1, request: { q: 1 }, createdAt: 7 })
      expect(wait?.tokenDigest).toMatch(/^[0-9a-f]{64}$/)
      const other = yield* ControlExecutor.pendingWaitOf({ runId: "r", reason: "timer", token, createdAt: 1 })
      expect(other).toBeUndefined()
      const tokenless = yield* ControlExecutor.pendingWaitOf({ runId: "r", reason: "approval", token: null, createdAt: 1 })
      expect(tokenless).toBeUndefined()
    }))

  it.effect("makeNoop declines launches and knows nothing; overrides replace members", () =>
    Effect.gen(function*() {
      const noop = ControlExecutor.makeNoop()
      expect(yield* noop.deliverSignal({ runId: "r", signal: { name: "go", payload: null } })).toBe("unknown")
      expect(yield* noop.resumeRun({ runId: "r" })).toBe("unknown")
      expect(noop.requestCancel).toBeUndefined()
      const custom = ControlExecutor.makeNoop({ resumeRun: () => Effect.succeed("resuming" as const) })
      expect(yield* custom.resumeRun({ runId: "r" })).toBe("resuming")
    }))
})
