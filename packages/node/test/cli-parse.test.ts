/**
 * The CLI's value syntaxes, error mapping and renderers (node.md 6.2, 6.3), without a database.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliFailure, fromError, render, renderJson } from "../src/internal/cliFailure.js"
import * as Parse from "../src/internal/cliParse.js"
import * as Render from "../src/internal/cliRender.js"
import * as Table from "../src/internal/cliTable.js"

const usageOf = (f: () => unknown): CliFailure => {
  try {
    f()
  } catch (error) {
    if (error instanceof CliFailure) return error
    throw error
  }
  throw new Error("expected a CliFailure")
}

describe("cli parsing", () => {
  it("reads durations and time points", () => {
    expect(Parse.durationMs("--lock-wait", "2s")).toBe(2000)
    expect(Parse.durationMs("--lock-wait", "500ms")).toBe(500)
    expect(Parse.durationMs("--lock-wait", "2 seconds")).toBe(2000)
    expect(Parse.durationMs("--lock-wait", "15m")).toBe(900_000)
    const now = 1_800_000_000_000
    expect(Parse.timePoint("--since", "90s", now)).toBe(now - 90_000)
    expect(Parse.timePoint("--since", "3d", now)).toBe(now - 3 * 86_400_000)
    expect(Parse.timePoint("--since", "1700000000000", now)).toBe(1_700_000_000_000)
    expect(Parse.timePoint("--until", "2026-11-30T10:00:00Z", now)).toBe(Date.parse("2026-11-30T10:00:00Z"))
    const bad = usageOf(() => Parse.timePoint("--since", "yesterday", now))
    expect(bad.exitCode).toBe(2)
    expect(bad.message).toContain("--since expects")
    expect(usageOf(() => Parse.durationMs("--lock-wait", "soon")).exitCode).toBe(2)
  })

  it("validates statuses, decisions, limits, JSON, principals and approval targets", () => {
    expect(Parse.status("waiting-approval")).toBe("waiting-approval")
    expect(usageOf(() => Parse.status("bogus")).message).toContain("accepted, running, parked")
    expect(usageOf(() => Parse.decision("maybe")).exitCode).toBe(2)
    expect(usageOf(() => Parse.limit(501)).message).toContain("between 1 and 500")
    expect(Parse.limit("20")).toBe(20)
    expect(usageOf(() => Parse.limit("abc")).message).toBe(`--limit must be an integer between 1 and 500, got "abc"`)
    expect(usageOf(() => Parse.limit("2e1")).exitCode).toBe(2)
    expect(Parse.tail("0")).toBe(0)
    expect(usageOf(() => Parse.after("1.5")).message).toContain("--after must be a non-negative integer")
    expect(Parse.json("--input", '{"a":1}')).toEqual({ a: 1 })
    expect(usageOf(() => Parse.json("--input", "{root:")).message).toMatch(/^--input is not valid JSON: /)
    expect(Parse.principal("bob")).toEqual({ id: "bob", kind: "operator" })
    expect(Parse.principal("service:deployer")).toEqual({ id: "deployer", kind: "service" })
    expect(usageOf(() => Parse.principal(":x")).exitCode).toBe(2)
    expect(Parse.approvalTarget("plan-3")).toEqual({ _tag: "Plan", planId: "plan-3" })
    expect(Parse.approvalTarget("run-3:deploy:prod")).toEqual({ _tag: "Node", runId: "run-3", requestId: "deploy:prod" })
    expect(usageOf(() => Parse.approvalTarget("run-3:")).exitCode).toBe(2)
  })

  it("moves global options given before the verb after it", () => {
    const verbs = ["runs", "run"]
    expect(Parse.hoistGlobals(["--db", "x.db", "--json", "runs", "--limit", "5"], verbs))
      .toEqual(["runs", "--limit", "5", "--db", "x.db", "--json"])
    expect(Parse.hoistGlobals(["--db=x.db", "run", "run-1"], verbs)).toEqual(["run", "run-1", "--db=x.db"])
    expect(Parse.hoistGlobals(["runs", "--db", "x.db"], verbs)).toEqual(["runs", "--db", "x.db"])
    expect(Parse.hoistGlobals(["--bogus", "runs"], verbs)).toEqual(["--bogus", "runs"])
  })
})

describe("cli error mapping", () => {
  const target = { location: "/tmp/x.db", lockWaitMs: 2_000 }

  it("maps library errors to the spec's exit codes and messages", () => {
    expect(fromError({ _tag: "RunNotFound", code: "run_not_found", runId: "run-99" }, target))
      .toMatchObject({ exitCode: 3, message: 'run "run-99" not found in /tmp/x.db' })
    expect(fromError({ _tag: "PlanDenied", code: "plan_denied", message: "plan-1 was denied" }, target).exitCode).toBe(4)
    expect(fromError({ _tag: "InvalidInput", code: "invalid_input", issue: "limit: bad" }, target)).toMatchObject({ exitCode: 2, message: "limit: bad" })
    expect(fromError({ _tag: "@baton/database/DatabaseOpenError", reason: "locked", message: "held" }, target).exitCode).toBe(5)
    expect(fromError({ _tag: "@baton/database/MigrationError", reason: "ahead", message: "the database is ahead of this build" }, target))
      .toMatchObject({ exitCode: 5, message: "the database is ahead of this build" })
    const busy = fromError({ _tag: "PersistenceError", code: "persistence_failed", message: "x", cause: { _tag: "@baton/database/DatabaseError", code: "busy" } }, target)
    expect(busy).toMatchObject({ exitCode: 5, message: "/tmp/x.db is locked by another writer; gave up after 2 s", hint: "retry, or raise --lock-wait" })
    expect(fromError(new Error("boom"), target).exitCode).toBe(1)
    expect(render(busy)).toBe("baton: /tmp/x.db is locked by another writer; gave up after 2 s\nhint: retry, or raise --lock-wait")
    expect(JSON.parse(renderJson(busy))).toEqual({ error: { code: "locked", message: busy.message, exitCode: 5 } })
  })
})

describe("cli rendering", () => {
  it("aligns tables and shows owners with stale leases", () => {
    expect(Table.table(["A", "LONGER"], [["xx", "y"], ["x", ""]])).toBe("A   LONGER\nxx  y\nx")
    const summary = {
      runId: "run-1",
      flowId: "index-dir",
      status: "running" as const,
      createdAt: 0,
      updatedAt: 0,
      ownerId: JSON.stringify({ hostId: "vm/boot/ns", pid: 42, nonce: "n" })
    }
    expect(Render.ownerCell(summary, 100_000, 110_000)).toBe("vm:42")
    expect(Render.ownerCell(summary, 100_000, 142_000)).toBe("vm:42 (stale 42 s)")
    expect(Render.waitingCell({ ...summary, pendingWaits: [{ runId: "run-1", reason: "approval", token: "t", name: "deploy", createdAt: 0 }] }))
      .toBe("approval:deploy")
    expect(Table.bytes(20_045_134)).toBe("20.0 MB")
    expect(Table.count(2179)).toBe("2,179")
  })
})
