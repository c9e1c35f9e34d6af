/**
 * Check 40 (and 42's half): an owner stopped past the stale cutoff, then
 * continued after a takeover, is fenced out of every write and stops itself.
 * Real time: the lease must really go stale (about 31 s).
 */
import { expect, it } from "@effect/vitest"
import { spawnWorker } from "../support/worker.js"
import type { Target } from "./processes.js"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const staleOwnerSuite = (makeTarget: () => Promise<Target>) => {
  it("40/must-hold: a SIGSTOPped owner continued after a takeover gets FenceLost and stops its work", async () => {
    const target = await makeTarget()
    const [a, b] = await Promise.all([spawnWorker(target.args), spawnWorker(target.args)])
    try {
      const runId = "stopped"
      const A = { hostId: "host-a", pid: a.pid, nonce: "a" }
      const B = { hostId: "host-b", pid: b.pid, nonce: "b" }
      await Promise.all([a.call("realClock"), b.call("realClock")])
      await a.call("create", { runId })
      const start = await a.call<number>("now")
      const pending = { status: "pending", owner: null, heartbeatAtMs: null }
      expect(await a.call("claimAndOwn", { runId, expected: pending, owner: A, nowMs: start })).toEqual({
        _tag: "Activated"
      })
      await a.call("startKeepAlive", { runId, owner: A })
      await sleep(2_500)
      const beating = await b.call("get", { runId })
      expect(beating.heartbeatAtMs).toBeGreaterThan(start)

      a.child.kill("SIGSTOP")
      try {
        const stopped = await b.call("get", { runId })
        // Wait until the stored stamp is stale by B's own reading.
        while ((await b.call<number>("now")) <= stopped.heartbeatAtMs + 30_000) await sleep(500)
        const nowMs = await b.call<number>("now")
        const evidence = { expectedOwner: A, checkedAtMs: nowMs, kind: "lease-expired" }
        expect(await b.call("claimAndOwn", { runId, expected: stopped, owner: B, nowMs, evidence })).toEqual({
          _tag: "Activated"
        })
      } finally {
        a.child.kill("SIGCONT")
      }

      const nowA = await a.call<number>("now")
      expect(await a.call("heartbeat", { runId, owner: A, nowMs: nowA })).toEqual({ _tag: "FenceLost" })
      expect(await a.call("transitionOwned", { runId, owner: A, to: "completed" })).toEqual({ _tag: "FenceLost" })
      const attempt = { runId, stepKeyDigest: "s", attempt: 0, state: "running", startedAtMs: nowA, meta: {} }
      expect(await a.call("put", { attempt, owner: A })).toEqual({ _tag: "FenceLost" })

      let status: { workInterrupted: boolean; end: { _tag: string } | null } | null = null
      for (let i = 0; i < 40 && !status?.workInterrupted; i++) {
        status = await a.call("keepAliveStatus")
        if (!status?.workInterrupted) await sleep(250)
      }
      expect(status?.workInterrupted).toBe(true)
      expect(["Lost", "Lapsed"]).toContain(status?.end?._tag)

      const row = await b.call("get", { runId })
      expect([row.status, row.owner]).toEqual(["running", B])
      const facts = (await b.call<Array<{ type: string }>>("facts", { runId })).map((f) => f.type)
      expect(facts).toEqual(["claimed", "activated", "stolen", "activated"])
    } finally {
      await Promise.all([a.stop(), b.stop()])
      await target.dispose()
    }
  }, 300_000)
}
