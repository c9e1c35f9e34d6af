/**
 * Control errors: stable distinct codes, bare tags, JSON round trip (§3.2); canonical JSON (§3.1).
 */
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import * as ControlError from "../src/ControlError.js"
import { canonical, canonicalIssue, tryCanonical } from "../src/internal/canonical.js"

const samples: ReadonlyArray<ControlError.ControlError> = [
  new ControlError.AlreadyResolved({ requestId: "r" }),
  new ControlError.ClaimLost({ runId: "run-1", reason: "x", parkedBy: { hostId: "h", pid: 1 } }),
  new ControlError.CodeDrift({ runId: "run-1", flowId: "F", recorded: "d1", current: "d2" }),
  new ControlError.EnvelopeMismatch({ planId: "p", expected: "{}", actual: "[]" }),
  new ControlError.FlowNotFound({ flowId: "X" }),
  new ControlError.InvalidInput({ issue: "limit: bad" }),
  new ControlError.PersistenceError({ operation: "op", message: "m" }),
  new ControlError.PlanDenied({ planId: "p" }),
  new ControlError.PlanDigestMismatch({ planId: "p", expected: "a", actual: "b" }),
  new ControlError.PlanNotFound({ planId: "p" }),
  new ControlError.RunNotFound({ runId: "r" }),
  new ControlError.Unauthorized({ message: "no" }),
  new ControlError.LaunchFailed({ runId: "r", message: "boom" }),
  new ControlError.NoMatchingWait({ runId: "r", waitName: "go" })
]

describe("ControlError", () => {
  it("every error has a distinct stable code and its bare class name as tag", () => {
    const codes = samples.map((e) => e.code)
    expect(new Set(codes).size).toBe(samples.length)
    expect(codes).toEqual([
      "already_resolved", "claim_lost", "code_drift", "envelope_mismatch", "flow_not_found", "invalid_input",
      "persistence_failed", "plan_denied", "plan_digest_mismatch", "plan_not_found", "run_not_found", "unauthorized",
      "launch_failed", "no_matching_wait"
    ])
    expect(samples.map((e) => e._tag)).toEqual(samples.map((e) => e.constructor.name))
  })

  it("errors round-trip encode → JSON → decode and are recognized", () => {
    const encode = Schema.encodeSync(ControlError.ControlErrorSchema)
    const decode = Schema.decodeUnknownSync(ControlError.ControlErrorSchema)
    for (const error of samples) {
      const back = decode(JSON.parse(JSON.stringify(encode(error))))
      expect(back._tag).toBe(error._tag)
      expect(back.code).toBe(error.code)
      expect(ControlError.isControlError(back)).toBe(true)
    }
    expect(ControlError.isControlError(new Error("x"))).toBe(false)
    expect(new ControlError.PlanNotFound({ planId: "p" }).message).toContain("plan again")
    expect(new ControlError.PlanDenied({ planId: "p" }).message).toContain("create and approve a new plan")
  })
})

describe("canonical JSON", () => {
  it("sorts keys by code unit, omits undefined members and keeps array order", () => {
    expect(canonical({ b: 1, a: [3, { d: undefined, c: "x" }], B: null })).toBe("{\"B\":null,\"a\":[3,{\"c\":\"x\"}],\"b\":1}")
  })

  it("refuses values without a storable JSON form, naming the path", () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [{ a: cycle }, "$.a.self: cycle"],
      [{ n: Number.POSITIVE_INFINITY }, "$.n: number is not finite"],
      [{ b: 1n }, "$.b: bigint is not JSON"],
      [{ f: () => 1 }, "$.f: function is not JSON"],
      [{ s: Symbol("x") }, "$.s: symbol is not JSON"],
      [{ d: new Date(0) }, "$.d: not a plain object"],
      [{ t: "a\u0000" }, "$.t: string contains U+0000 or an unpaired surrogate"],
      [{ t: "\uDC00" }, "$.t: string contains U+0000 or an unpaired surrogate"],
      [{ ["k\u0000"]: 1 }, "$: key contains U+0000 or an unpaired surrogate"],
      [Object.defineProperty({}, "g", { get: () => 1, enumerable: true }), "$.g: accessor property"]
    ]
    for (const [value, issue] of cases) {
      const result = tryCanonical(value)
      expect(result).toEqual({ ok: false, issue })
    }
    expect(canonicalIssue(new Error("x"))).toBe("$: x")
  })
})
