import { describe, expect, it } from "vitest"
import * as Cancellation from "../src/Cancellation.js"

const alice = { id: "alice", kind: "human", stampedAt: 5 }

describe("Cancellation.attribute", () => {
  it("a run with its own request is attributed to control with that principal and reason", () => {
    const result = Cancellation.attribute({
      runs: [{ runId: "p", cancelRequestedAt: 10 }],
      requests: new Map([["p", { requestedAt: 9, principal: alice, reason: "stop" }]])
    })
    expect(result.get("p")).toEqual({ requestedAt: 9, source: "control", principal: alice, reason: "stop" })
  })

  it("a child with only a store request cascades from its requesting parent and inherits principal and reason", () => {
    const result = Cancellation.attribute({
      runs: [{ runId: "p", cancelRequestedAt: 10 }, { runId: "c", parentRunId: "p", cancelRequestedAt: 12 }],
      requests: new Map([["p", { requestedAt: 9, principal: alice, reason: "stop" }]])
    })
    expect(result.get("c")).toEqual({
      requestedAt: 12,
      source: "cascade",
      cascadedFrom: "p",
      principal: alice,
      reason: "stop"
    })
  })

  it("cascadedFrom is the nearest evidenced ancestor while the principal comes from the nearest requesting one", () => {
    const result = Cancellation.attribute({
      runs: [
        { runId: "root" },
        { runId: "mid", parentRunId: "root", cancelRequestedAt: 20 },
        { runId: "plain", parentRunId: "mid" },
        { runId: "leaf", parentRunId: "plain", cancelledAt: 30 }
      ],
      requests: new Map([["root", { requestedAt: 15, principal: alice, reason: "why" }]])
    })
    expect(result.get("leaf")).toEqual({
      requestedAt: 30,
      source: "cascade",
      cascadedFrom: "mid",
      principal: alice,
      reason: "why"
    })
    expect(result.get("mid")?.source).toBe("cascade")
    expect(result.get("mid")?.cascadedFrom).toBe("root")
    expect(result.has("plain")).toBe(false)
    expect(result.has("root")).toBe(true)
  })

  it("an engine interruption with no cancelled ancestor is attributed to the engine without a principal", () => {
    const result = Cancellation.attribute({
      runs: [{ runId: "p" }, { runId: "c", parentRunId: "p", cancelledAt: 40 }],
      requests: new Map()
    })
    expect(result.get("c")).toEqual({ requestedAt: 40, source: "engine" })
    expect(result.has("p")).toBe(false)
  })

  it("the walk stops at an ancestor missing from the input and at cycles", () => {
    const missing = Cancellation.attribute({
      runs: [{ runId: "c", parentRunId: "gone", cancelRequestedAt: 1 }],
      requests: new Map()
    })
    expect(missing.get("c")).toEqual({ requestedAt: 1, source: "engine" })
    const cycle = Cancellation.attribute({
      runs: [
        { runId: "a", parentRunId: "b", cancelRequestedAt: 1 },
        { runId: "b", parentRunId: "a" }
      ],
      requests: new Map()
    })
    expect(cycle.get("a")).toEqual({ requestedAt: 1, source: "engine" })
  })

  it("requestedAt prefers the run's own request, then the store request, then the interruption", () => {
    const result = Cancellation.attribute({
      runs: [{ runId: "a", cancelRequestedAt: 2, cancelledAt: 3 }, { runId: "b", cancelledAt: 3 }],
      requests: new Map([["a", { requestedAt: 1 }]])
    })
    expect(result.get("a")?.requestedAt).toBe(1)
    expect(result.get("b")?.requestedAt).toBe(3)
  })
})
