/**
 * `baton run` shows a requested resume by when it was requested (the delegation's time) and its request
 * sequence, labelled as such: the summary's `pendingResume` is a sequence number, never a timestamp.
 */
import * as ControlRuntime from "@baton/control/ControlRuntime"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Render from "../src/internal/cliRender.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { baton, runVerbs, tempDir } from "./cli-support.js"
import { flows } from "./fixtures/cli-wait-flows.js"

const config = fileURLToPath(new URL("./fixtures/cli-wait-config.ts", import.meta.url))

/** Requests a resume of `runId` as a client would; answers the pending delegation. */
const requestResume = (filename: string, runId: string) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const runtime = yield* ControlRuntime.ControlRuntime
      const sequence = yield* runtime.requestResume(runId)
      const pending = yield* runtime.pendingResumes
      return pending.find((r) => r.runId === runId && r.sequence === sequence)!
    }).pipe(Effect.provide(Layer.orDie(NodeRuntime.layer({ filename, mode: "client", flows }))))
  )

describe("cli run and a pending resume", () => {
  it("a pending resume is shown with its request time and labelled sequence, not the sequence as a 1970 time", async () => {
    const db = path.join(tempDir(), "baton.db")
    fs.writeFileSync(db, "")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", config)
    const runId = await runVerbs(cli).launch("wait-approval", "plan-1")
    const delegation = await requestResume(db, runId)
    expect(delegation.requestedAtMs).toBeGreaterThan(0)

    const shown = await cli("run", runId)
    expect(shown.code, shown.stderr).toBe(0)
    const line = shown.stdout.split("\n").find((l) => l.startsWith("pending resume"))
    const at = new Date(delegation.requestedAtMs).toISOString().replace(/\.\d{3}Z$/, "Z")
    expect(line).toBe(`pending resume  requested ${at} (request sequence ${delegation.sequence})`)
    expect(shown.stdout).not.toContain("1970-01-01")

    const json = JSON.parse((await cli("run", runId, "--json")).stdout) as {
      summary: { pendingResume?: number }
      pendingResume?: { sequence: number; requestedAtMs?: number }
    }
    expect(json.summary.pendingResume).toBe(delegation.sequence)
    expect(json.pendingResume).toEqual({ sequence: delegation.sequence, requestedAtMs: delegation.requestedAtMs })
  }, 60_000)

  it("a pending resume without a recorded request time is shown as its labelled sequence", () => {
    const text = Render.runSummary(
      { runId: "run-1", flowId: "f", status: "parked", createdAt: 0, updatedAt: 0, pendingResume: 7 },
      { heartbeatAtMs: null, nowMs: 0 }
    )
    expect(text.split("\n")).toContain("pending resume  request sequence 7")
  })
})
