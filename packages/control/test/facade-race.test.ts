/**
 * Cross-process races on one SQLite file: real OS processes, released together
 * by a latch file.
 */
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import * as Control from "../src/Control.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import type * as ControlSchema from "../src/ControlSchema.js"
import type { Action } from "./fixtures/facadeRace.js"
import { flows } from "./fixtures/facadeFlows.js"
import { count } from "./fixtures/facadeLifecycle.js"
import { sqlControl } from "./fixtures/facadeLayers.js"

const fixture = new URL("./fixtures/facadeRace.ts", import.meta.url)

interface Outcome {
  readonly ok: boolean
  readonly value?: unknown
  readonly error?: { readonly _tag: string; readonly issue?: string; readonly requestId?: string }
}

const tempFile = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-control-race-"))
  return { dir, filename: path.join(dir, "baton.db"), latch: path.join(dir, "go") }
}

/** Runs one child per action, releases them together and collects their outcomes. */
const race = async (filename: string, latch: string, actions: ReadonlyArray<Action>): Promise<Array<Outcome>> => {
  const children = actions.map((action) => spawnFixture(fixture, [JSON.stringify({ filename, latch, action })]))
  const done = children.map(completion)
  await Promise.all(children.map((child) =>
    new Promise<void>((resolve, reject) => {
      let buffer = ""
      child.stdout?.on("data", (chunk) => {
        buffer += String(chunk)
        if (buffer.includes("ready\n")) resolve()
      })
      child.once("exit", (code) => reject(new Error(`child exited ${code} before it was ready`)))
    })
  ))
  fs.writeFileSync(latch, "go")
  const results = await Promise.all(done)
  return results.map((result) => {
    if (result.code !== 0) throw new Error(`child failed: ${result.stderr}`)
    const last = result.stdout.trim().split("\n").at(-1)!
    return JSON.parse(last) as Outcome
  })
}

/** Runs `body` against the file in this process (migrated facade stack). */
const onFile = <A, E>(filename: string, body: Effect.Effect<A, E, Control.Control | ControlRuntime.ControlRuntime>) =>
  Effect.runPromise(
    body.pipe(Effect.provide(sqlControl(SqliteDatabase.layer({ filename }), { flows })), Effect.scoped) as Effect.Effect<A>
  )

describe("facade races across OS processes on one SQLite file", () => {
  it("two processes planning under one key at once get the same card and one plan exists", async () => {
    const { filename, latch } = tempFile()
    await onFile(filename, Effect.void)
    const outcomes = await race(filename, latch, [
      { _tag: "plan", input: { a: 1 }, key: "k" },
      { _tag: "plan", input: { a: 1 }, key: "k" }
    ])
    expect(outcomes.map((o) => o.ok)).toEqual([true, true])
    const [first, second] = outcomes.map((o) => o.value as ControlSchema.PlanCard)
    expect(second).toEqual(first)
    const rows = await onFile(filename, Effect.all([count("control_plans"), count("control_plan_keys"), count("control_tokens")]) as never)
    expect(rows).toEqual([1, 1, 1])
    const created = await onFile(filename, Effect.gen(function*() {
      const control = yield* Control.Control
      const page = yield* control.list({ _tag: "plans" })
      return page._tag === "plans" ? page.items.length : -1
    }))
    expect(created).toBe(1)
  })

  it("two processes planning different input under one key: one plan, the other InvalidInput", async () => {
    const { filename, latch } = tempFile()
    await onFile(filename, Effect.void)
    const outcomes = await race(filename, latch, [
      { _tag: "plan", input: { a: 1 }, key: "k" },
      { _tag: "plan", input: { a: 2 }, key: "k" }
    ])
    const failed = outcomes.filter((o) => !o.ok)
    expect(outcomes.filter((o) => o.ok)).toHaveLength(1)
    expect(failed).toHaveLength(1)
    expect(failed[0]?.error).toMatchObject({ _tag: "InvalidInput", issue: "idempotency key k was used for another plan" })
    const rows = await onFile(filename, Effect.all([count("control_plans"), count("control_plan_keys"), count("control_tokens")]) as never)
    expect(rows).toEqual([1, 1, 1])
  })

  it("two processes approving and denying one plan at once: exactly one decision lands, the other is AlreadyResolved", async () => {
    const { filename, latch } = tempFile()
    const card = await onFile(filename, Effect.flatMap(Control.Control, (c) => c.plan({ flowId: "F", input: { a: 1 } })))
    const outcomes = await race(filename, latch, [
      { _tag: "decide", decision: "approve", approval: card.approval },
      { _tag: "decide", decision: "deny", approval: card.approval }
    ])
    const winners = outcomes.filter((o) => o.ok)
    const losers = outcomes.filter((o) => !o.ok)
    expect(winners).toHaveLength(1)
    expect(losers).toHaveLength(1)
    expect(losers[0]?.error).toMatchObject({ _tag: "AlreadyResolved", requestId: card.planId })
    const decision = await onFile(filename, Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getPlan(card.planId)))
    const winner = outcomes.indexOf(winners[0]!) === 0 ? "approved" : "denied"
    expect(decision.decision).toBe(winner)
    const grants = await onFile(filename, Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.grants))
    expect(grants).toHaveLength(winner === "approved" ? 1 : 0)
  })

  it("[14] two processes running one approved plan under one key start exactly one run", async () => {
    const { filename, latch } = tempFile()
    const card = await onFile(filename, Effect.gen(function*() {
      const control = yield* Control.Control
      const planned = yield* control.plan({ flowId: "F", input: { a: 1 } })
      yield* control.approve(planned.approval)
      return planned
    }))
    const action: Action = { _tag: "run", planId: card.planId, digest: card.digest, envelope: card.envelope, key: "r" }
    const outcomes = await race(filename, latch, [action, action])
    expect(outcomes.map((o) => o.ok)).toEqual([true, true])
    const receipts = outcomes.map((o) => o.value as ControlSchema.Receipt)
    expect(receipts.map((r) => r._tag).sort()).toEqual(["Accepted", "AlreadyApplied"])
    const runIds = receipts.map((r) => ("runId" in r ? r.runId : undefined))
    expect(runIds[0]).toBeDefined()
    expect(runIds[1]).toBe(runIds[0])
    expect(await onFile(filename, count("flows_runs") as never)).toBe(1)
  })
})
