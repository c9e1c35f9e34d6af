/**
 * The torture's history checker (`scripts/torture/checker.ts`) over planted histories: a clean
 * one passes, and each planted fault is reported as its own kind.
 */
import { describe, expect, it } from "vitest"
import * as Checker from "../../../scripts/torture/checker.js"

const A = "torture/101/a"
const B = "torture/202/b"

type Draft = {
  entries: Array<Checker.Entry>
  facts: Array<Checker.Fact>
  attempts: Array<Checker.Attempt>
  effects: Array<Checker.Effect>
  runs: Array<Checker.RunRow>
}

/** A writer of one run's history, in commit order, the way the torture workers write it. */
const history = (runId = "run-1", steps = 2) => {
  const d: Draft = { entries: [], facts: [], attempts: [], effects: [], runs: [] }
  let seq = 0
  let factSeq = 0
  const attemptsOf = (step: number) => d.attempts.filter((a) => a.step === step).length
  const api = {
    acquire: (owner: string) => {
      d.facts.push({ runId, seq: factSeq++, transition: "claimed", owner })
      d.facts.push({ runId, seq: factSeq++, transition: "activated", owner })
      const fence = seq++
      d.entries.push({ runId, seq: fence, eventType: "torture.acquired", owner, fence: null, step: null })
      return fence
    },
    steal: (owner: string) => {
      d.facts.push({ runId, seq: factSeq++, transition: "stolen", owner })
      d.facts.push({ runId, seq: factSeq++, transition: "activated", owner })
      const fence = seq++
      d.entries.push({ runId, seq: fence, eventType: "torture.acquired", owner, fence: null, step: null })
      return fence
    },
    step: (owner: string, fence: number, step: number) => {
      const at = seq++
      d.entries.push({ runId, seq: at, eventType: "torture.step", owner, fence, step })
      d.effects.push({ runId, step, owner, fence, journalSeq: at })
      d.attempts.push({ runId, step, attempt: attemptsOf(step), state: "succeeded", owner })
    },
    complete: (owner: string, fence: number) => {
      d.entries.push({ runId, seq: seq++, eventType: "torture.completed", owner, fence, step: null })
      d.facts.push({ runId, seq: factSeq++, transition: "released", owner })
    },
    status: (status: string) => d.runs.push({ runId, status }),
    draft: d,
    done: (): Checker.History => ({ expectedRuns: [runId], steps, ...d })
  }
  return api
}

const kinds = (h: Checker.History) => Checker.check(h).findings.map((f) => f.kind)

describe("torture history checker", () => {
  it("a clean history with a steal passes with no findings", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    const b = h.steal(B)
    h.step(B, b, 1)
    h.complete(B, b)
    h.status("completed")
    const report = Checker.check(h.done())
    expect(report.findings).toEqual([])
    expect(report).toMatchObject({ runs: 1, completed: 1, steals: 1, activations: 2, stepCommits: 2, violations: 0 })
  })

  it("two owners whose fenced writes interleave are a double owner", () => {
    const h = history("run-1", 3)
    const a = h.acquire(A)
    h.step(A, a, 0)
    const b = h.steal(B)
    h.step(B, b, 1)
    h.step(A, a, 2)
    h.complete(B, b)
    h.status("completed")
    const report = Checker.check(h.done())
    expect(kinds(h.done())).toContain("double_owner")
    expect(report.findings.find((f) => f.kind === "double_owner")?.detail).toContain(A)
  })

  it("a deposed owner's write that landed after the next activation is reported", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    const b = h.steal(B)
    h.step(A, a, 1) // A was stopped, resumed and its commit got through
    h.complete(B, b)
    h.status("completed")
    const findings = Checker.check(h.done()).findings
    expect(findings.map((f) => f.kind)).toEqual(["deposed_write"])
    expect(findings[0]!.detail).toContain(`by ${A} (fence ${a})`)
  })

  it("a step committed twice is reported as doubled", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    h.step(A, a, 0)
    h.step(A, a, 1)
    h.complete(A, a)
    h.status("completed")
    expect(kinds(h.done())).toEqual(["step_doubled"])
  })

  it("an application row without its step entry is a doubled commit the journal does not show", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    h.step(A, a, 1)
    h.complete(A, a)
    h.status("completed")
    h.draft.effects.push({ runId: "run-1", step: 1, owner: A, fence: a, journalSeq: 99 })
    expect(kinds(h.done())).toEqual(expect.arrayContaining(["step_doubled", "step_mismatch"]))
  })

  it("a completed run missing a step commit is a lost step", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    h.complete(A, a)
    h.status("completed")
    expect(kinds(h.done())).toEqual(["step_lost"])
  })

  it("a run completed twice is terminal twice", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    h.step(A, a, 1)
    h.complete(A, a)
    h.complete(A, a)
    h.status("completed")
    expect(kinds(h.done())).toEqual(["terminal_twice"])
  })

  it("a run still running at the end is not terminal", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    h.status("running")
    expect(kinds(h.done())).toEqual(["not_terminal"])
  })

  it("a created run with no row at all is not terminal", () => {
    expect(kinds({ ...history().done(), expectedRuns: ["run-1"] })).toEqual(["not_terminal"])
  })

  it("a write naming another owner's fence is a bad fence", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    h.step(B, a, 1)
    h.complete(A, a)
    h.status("completed")
    expect(kinds(h.done())).toEqual(expect.arrayContaining(["bad_fence"]))
  })

  it("an activation fact with no acquisition entry is an ownership mismatch", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    h.step(A, a, 1)
    h.complete(A, a)
    h.status("completed")
    h.draft.facts.push({ runId: "run-1", seq: 50, transition: "activated", owner: B })
    expect(kinds(h.done())).toEqual(["ownership_mismatch"])
  })

  it("a committed step whose attempt did not succeed is an attempt mismatch", () => {
    const h = history()
    const a = h.acquire(A)
    h.step(A, a, 0)
    h.step(A, a, 1)
    h.complete(A, a)
    h.status("completed")
    h.draft.attempts[1] = { ...h.draft.attempts[1]!, state: "running" }
    expect(kinds(h.done())).toEqual(["attempt_mismatch"])
  })
})
