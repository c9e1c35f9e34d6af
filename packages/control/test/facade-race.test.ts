/**
 * Cross-process races on one SQLite file: two real OS processes, released
 * together by a latch file per race. Both children serve every race in turn
 * (one start-up each); the parent prepares each race's file beforehand.
 */
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import * as Control from "../src/Control.js"
import * as ControlRuntime from "../src/ControlRuntime.js"
import type * as ControlSchema from "../src/ControlSchema.js"
import type { Action, Race } from "./fixtures/facadeRace.js"
import { flows } from "./fixtures/facadeFlows.js"
import { count } from "./fixtures/facadeLifecycle.js"
import { sqlControl } from "./fixtures/facadeLayers.js"

const fixture = new URL("./fixtures/facadeRace.ts", import.meta.url)

interface Outcome {
  readonly ok: boolean
  readonly value?: unknown
  readonly error?: { readonly _tag: string; readonly issue?: string; readonly requestId?: string }
}

/** Runs `body` against a file in this process (migrated facade stack). */
const onFile = <A, E>(filename: string, body: Effect.Effect<A, E, Control.Control | ControlRuntime.ControlRuntime>) =>
  Effect.runPromise(
    body.pipe(Effect.provide(sqlControl(SqliteDatabase.layer({ filename }), { flows })), Effect.scoped) as Effect.Effect<A>
  )

const planTables = (filename: string) =>
  onFile(filename, Effect.all([count("control_plans"), count("control_plan_keys"), count("control_tokens")]) as never)

/** One child's line reader: resolves "ready <i>" and "result <i>" lines as they arrive. */
const lines = (child: ChildProcess) => {
  const waiting = new Map<string, (line: string) => void>()
  const seen = new Map<string, string>()
  let buffer = ""
  child.stdout?.on("data", (chunk) => {
    buffer += String(chunk)
    let newline = buffer.indexOf("\n")
    while (newline >= 0) {
      const line = buffer.slice(0, newline)
      buffer = buffer.slice(newline + 1)
      const [kind, index] = line.split(" ")
      const key = `${kind} ${index}`
      const resolve = waiting.get(key)
      if (resolve !== undefined) resolve(line)
      else seen.set(key, line)
      newline = buffer.indexOf("\n")
    }
  })
  return (key: string): Promise<string> =>
    seen.has(key) ? Promise.resolve(seen.get(key)!) : new Promise((resolve) => waiting.set(key, resolve))
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "baton-control-race-"))
const file = (name: string) => ({ filename: path.join(dir, `${name}.db`), latch: path.join(dir, `${name}.go`) })
const files = { sameKey: file("same-key"), otherInput: file("other-input"), decide: file("decide"), run: file("run") }

let card: ControlSchema.PlanCard
let approvedCard: ControlSchema.PlanCard
let children: Array<ChildProcess> = []
let readers: Array<(key: string) => Promise<string>> = []
let exits: Array<Promise<{ readonly code: number | null; readonly stderr: string }>> = []

/** Releases race `index` in both children and answers their outcomes, first child first. */
const release = async (index: number, latch: string): Promise<Array<Outcome>> => {
  await Promise.all(readers.map((read) => read(`ready ${index}`)))
  fs.writeFileSync(latch, "go")
  const results = await Promise.all(readers.map((read) => read(`result ${index}`)))
  return results.map((line) => JSON.parse(line.slice(line.indexOf(" ", "result ".length) + 1)) as Outcome)
}

beforeAll(async () => {
  await onFile(files.sameKey.filename, Effect.void)
  await onFile(files.otherInput.filename, Effect.void)
  card = await onFile(files.decide.filename, Effect.flatMap(Control.Control, (c) => c.plan({ flowId: "F", input: { a: 1 } })))
  approvedCard = await onFile(files.run.filename, Effect.gen(function*() {
    const control = yield* Control.Control
    const planned = yield* control.plan({ flowId: "F", input: { a: 1 } })
    yield* control.approve(planned.approval)
    return planned
  }))
  const runAction: Action = {
    _tag: "run",
    planId: approvedCard.planId,
    digest: approvedCard.digest,
    envelope: approvedCard.envelope,
    key: "r"
  }
  const racesFor = (child: 0 | 1): ReadonlyArray<Race> => [
    { ...files.sameKey, action: { _tag: "plan", input: { a: 1 }, key: "k" } },
    { ...files.otherInput, action: { _tag: "plan", input: { a: child + 1 }, key: "k" } },
    { ...files.decide, action: { _tag: "decide", decision: child === 0 ? "approve" : "deny", approval: card.approval } },
    { ...files.run, action: runAction }
  ]
  children = [0, 1].map((child) => spawnFixture(fixture, [JSON.stringify(racesFor(child as 0 | 1))]))
  readers = children.map(lines)
  exits = children.map(completion)
}, 180_000)

afterAll(async () => {
  for (const child of children) child.kill()
  await Promise.all(exits)
  fs.rmSync(dir, { recursive: true, force: true })
})

describe("facade races across OS processes on one SQLite file", () => {
  it("two processes planning under one key at once get the same card and one plan exists", async () => {
    const outcomes = await release(0, files.sameKey.latch)
    expect(outcomes.map((o) => o.ok)).toEqual([true, true])
    const [first, second] = outcomes.map((o) => o.value as ControlSchema.PlanCard)
    expect(second).toEqual(first)
    expect(await planTables(files.sameKey.filename)).toEqual([1, 1, 1])
  })

  it("two processes planning different input under one key: one plan, the other InvalidInput", async () => {
    const outcomes = await release(1, files.otherInput.latch)
    const failed = outcomes.filter((o) => !o.ok)
    expect(outcomes.filter((o) => o.ok)).toHaveLength(1)
    expect(failed).toHaveLength(1)
    expect(failed[0]?.error).toMatchObject({ _tag: "InvalidInput", issue: "idempotency key k was used for another plan" })
    expect(await planTables(files.otherInput.filename)).toEqual([1, 1, 1])
  })

  it("two processes approving and denying one plan at once: exactly one decision lands, the other is AlreadyResolved", async () => {
    const outcomes = await release(2, files.decide.latch)
    const winners = outcomes.filter((o) => o.ok)
    const losers = outcomes.filter((o) => !o.ok)
    expect(winners).toHaveLength(1)
    expect(losers).toHaveLength(1)
    expect(losers[0]?.error).toMatchObject({ _tag: "AlreadyResolved", requestId: card.planId })
    const stored = await onFile(files.decide.filename, Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.getPlan(card.planId)))
    const winner = outcomes.indexOf(winners[0]!) === 0 ? "approved" : "denied"
    expect(stored.decision).toBe(winner)
    const grants = await onFile(files.decide.filename, Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.grants))
    expect(grants).toHaveLength(winner === "approved" ? 1 : 0)
  })

  it("[14] two processes running one approved plan under one key start exactly one run", async () => {
    const outcomes = await release(3, files.run.latch)
    expect(outcomes.map((o) => o.ok)).toEqual([true, true])
    const receipts = outcomes.map((o) => o.value as ControlSchema.Receipt)
    expect(receipts.map((r) => r._tag).sort()).toEqual(["Accepted", "AlreadyApplied"])
    const runIds = receipts.map((r) => ("runId" in r ? r.runId : undefined))
    expect(runIds[0]).toBeDefined()
    expect(runIds[1]).toBe(runIds[0])
    expect(await onFile(files.run.filename, count("flows_runs") as never)).toBe(1)
    const exited = await Promise.all(exits)
    expect(exited.map((e) => e.code)).toEqual([0, 0])
  })
})
