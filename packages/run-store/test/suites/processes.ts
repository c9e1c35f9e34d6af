/**
 * Checks 37–39 (and 41–42): run-store hosts in separate OS processes on one
 * database, with injected wall clocks the parent controls. Also the journal's
 * checks 30–31 over this package's `SqlConsensus`: the strategy and the
 * journal's fenced appends, driven directly (no store), across processes.
 */
import { expect, it } from "@effect/vitest"
import { spawnWorker, type Worker, type WorkerError } from "../support/worker.js"

/** Where workers connect: the fixture arguments for one fresh database, and its teardown. */
export interface Target {
  readonly args: ReadonlyArray<string>
  readonly dispose: () => Promise<void>
}

/** Runs `f` over `items`, `size` at a time, keeping results in order. */
const inBatches = async <T, R>(items: ReadonlyArray<T>, size: number, f: (item: T, index: number) => Promise<R>) => {
  const results: Array<R> = []
  for (let i = 0; i < items.length; i += size) {
    results.push(...await Promise.all(items.slice(i, i + size).map((item, j) => f(item, i + j))))
  }
  return results
}

const pendingSnapshot = { status: "pending", owner: null, heartbeatAtMs: null }
const running = (owner: object, heartbeatAtMs: number) => ({ status: "running", owner, heartbeatAtMs })

const withWorkers = async (
  makeTarget: () => Promise<Target>,
  count: number,
  body: (workers: ReadonlyArray<Worker>) => Promise<void>
) => {
  const target = await makeTarget()
  const workers: Array<Worker> = []
  try {
    // Concurrent migration passes serialize; the later ones find the ledger current.
    const started = await Promise.allSettled(Array.from({ length: count }, () => spawnWorker(target.args)))
    for (const s of started) if (s.status === "fulfilled") workers.push(s.value)
    for (const s of started) if (s.status === "rejected") throw s.reason
    await body(workers)
  } finally {
    await Promise.all(workers.map((w) => w.stop()))
    await target.dispose()
  }
}

export const processSuite = (makeTarget: () => Promise<Target>, races: number) => {
  it(`37/must-hold: two processes race claimAndOwn on ${races} pending runs (exactly one Activated each), then requestCancel against a guarded completion`, async () => {
    await withWorkers(makeTarget, 2, async ([a, b]) => {
      const A = { hostId: "host", pid: a!.pid, nonce: "a" }
      const B = { hostId: "host", pid: b!.pid, nonce: "b" }
      const runIds = Array.from({ length: races }, (_, i) => `race-${i}`)
      await a!.call("createMany", { runIds })
      // Each run is raced by both processes; a few runs are in flight at once to overlap IPC latency.
      const outcomes = await inBatches(runIds, 5, (runId) =>
        Promise.all([
          a!.call("claimAndOwn", { runId, expected: pendingSnapshot, owner: A, nowMs: 0 }),
          b!.call("claimAndOwn", { runId, expected: pendingSnapshot, owner: B, nowMs: 0 })
        ]))
      const winners = outcomes.map(([ra, rb]) => {
        expect([ra._tag, rb._tag].filter((t) => t === "Activated").length).toBe(1)
        const aWon = ra._tag === "Activated"
        expect(["HeartbeatFresh", "SnapshotChanged"]).toContain(aWon ? rb._tag : ra._tag)
        return aWon ? A : B
      })
      // Both processes read the same winner for every run.
      const [oa, ob] = await Promise.all([a!.call("ownersOf", { runIds }), b!.call("ownersOf", { runIds })])
      expect(oa).toEqual(winners)
      expect(ob).toEqual(winners)

      // On 20 of them, every fenced write of the loser is refused and the winner's succeed.
      for (let i = 0; i < Math.min(20, races); i++) {
        const runId = runIds[i]!
        const W = winners[i]!
        const [winner, loser, L] = W === A ? [a!, b!, B] : [b!, a!, A]
        const attempt = { runId, stepKeyDigest: "s", attempt: 0, state: "running", startedAtMs: 0, meta: {} }
        const done = { runId, stepKeyDigest: "s", attempt: 0, state: "succeeded", finishedAtMs: 2 }
        expect(await loser.call("heartbeat", { runId, owner: L, nowMs: 1 })).toEqual({ _tag: "FenceLost" })
        expect(await loser.call("transitionOwned", { runId, owner: L, to: "running" })).toEqual({ _tag: "FenceLost" })
        expect(await loser.call("put", { attempt, owner: L })).toEqual({ _tag: "FenceLost" })
        expect(await winner.call("heartbeat", { runId, owner: W, nowMs: 1 })).toEqual({ _tag: "Updated", heartbeatAtMs: 1 })
        expect(await winner.call("transitionOwned", { runId, owner: W, to: "running" })).toEqual({ _tag: "Transitioned" })
        expect(await winner.call("put", { attempt, owner: W })).toEqual({ _tag: "Inserted" })
        expect(await loser.call("finish", { attempt: done, owner: L })).toEqual({ _tag: "FenceLost" })
        expect(await winner.call("finish", { attempt: done, owner: W })).toEqual({ _tag: "Finished" })
      }

      // must-hold: requestCancel (the other process) races the owner's guarded completion on every run.
      const pairs = await inBatches(runIds, 5, async (runId, i) => {
        const W = winners[i]!
        const [owner, observer] = W === A ? [a!, b!] : [b!, a!]
        const [cancel, transition] = await Promise.all([
          observer.call("requestCancel", { runId, nowMs: 7 }),
          owner.call("transitionOwned", { runId, owner: W, to: "completed", guard: { cancelRequested: "absent" } })
        ])
        return `${cancel._tag}${cancel.status ? `{${cancel.status}}` : ""}/${transition._tag}`
      })
      for (const pair of pairs) {
        expect(["CancelRequested/GuardFailed", "Terminal{completed}/Transitioned"]).toContain(pair)
      }
      expect(pairs.length).toBe(races)
    })
  })

  it("38: a steal racing the owner's heartbeat at 30,001 leaves one owner everyone agrees on", async () => {
    await withWorkers(makeTarget, 2, async ([a, b]) => {
      const A = { hostId: "host-a", pid: a!.pid, nonce: "a" }
      const B = { hostId: "host-b", pid: b!.pid, nonce: "b" }
      for (let i = 0; i < 10; i++) {
        const runId = `steal-${i}`
        await a!.call("setClock", { ms: 0 })
        await a!.call("create", { runId })
        expect(await a!.call("claimAndOwn", { runId, expected: pendingSnapshot, owner: A, nowMs: 0 })).toEqual({
          _tag: "Activated"
        })
        const shared = { runId, stepKeyDigest: "shared", attempt: 0, state: "running", startedAtMs: 0, meta: {} }
        expect(await a!.call("put", { attempt: shared, owner: A })).toEqual({ _tag: "Inserted" })
        await Promise.all([a!.call("setClock", { ms: 30_001 }), b!.call("setClock", { ms: 30_001 })])
        const evidence = { expectedOwner: A, checkedAtMs: 30_001, kind: "cross-host-unreachable-stale" }
        await Promise.all([
          a!.call("heartbeat", { runId, owner: A, nowMs: 30_001 }),
          b!.call("stealAndActivate", { runId, expected: running(A, 0), owner: B, nowMs: 30_001, evidence })
        ])
        const [ga, gb] = await Promise.all([a!.call("get", { runId }), b!.call("get", { runId })])
        expect(ga.owner.nonce).toBe(gb.owner.nonce)
        const aWon = ga.owner.nonce === "a"
        const [winner, loser, W, L] = aWon ? [a!, b!, A, B] : [b!, a!, B, A]
        expect((await winner.call("heartbeat", { runId, owner: W, nowMs: 30_002 }))._tag).toBe("Updated")
        expect(await loser.call("heartbeat", { runId, owner: L, nowMs: 30_002 })).toEqual({ _tag: "FenceLost" })
        expect(await loser.call("transitionOwned", { runId, owner: L, to: "running" })).toEqual({ _tag: "FenceLost" })
        expect(await loser.call("put", { attempt: { ...shared, attempt: 1 }, owner: L })).toEqual({ _tag: "FenceLost" })
        const finished = { runId, stepKeyDigest: "shared", attempt: 0, state: "succeeded", finishedAtMs: 30_003 }
        expect(await loser.call("finish", { attempt: finished, owner: L })).toEqual({ _tag: "FenceLost" })
        expect(await winner.call("finish", { attempt: finished, owner: W })).toEqual({ _tag: "Finished" })
        expect(await winner.call("transitionOwned", { runId, owner: W, to: "completed" })).toEqual({
          _tag: "Transitioned"
        })
      }
    })
  })

  it("39/must-hold: a SIGKILLed owner is taken over only after staleness, only with matching evidence", async () => {
    await withWorkers(makeTarget, 2, async ([a, b]) => {
      const runId = "killed"
      const A = { hostId: "h", pid: a!.pid, nonce: "a" }
      const B = { hostId: "h", pid: b!.pid, nonce: "b" }
      await a!.call("create", { runId })
      expect(await a!.call("claimAndOwn", { runId, expected: pendingSnapshot, owner: A, nowMs: 0 })).toEqual({
        _tag: "Activated"
      })
      await a!.call("setClock", { ms: 1_000 })
      expect(await a!.call("heartbeat", { runId, owner: A, nowMs: 1_000 })).toEqual({
        _tag: "Updated",
        heartbeatAtMs: 1_000
      })
      const stamped = running(A, 1_000)
      // While A is alive the probe finds no evidence, and a fresh lease cannot be taken anyway.
      await b!.call("setClock", { ms: 1_500 })
      expect(await b!.call("probe", { expectedOwner: A, claimant: B, checkedAtMs: 1_500 })).toBeNull()
      expect(await b!.call("claimAndOwn", { runId, expected: stamped, owner: B, nowMs: 1_500 })).toEqual({
        _tag: "HeartbeatFresh"
      })
      const exited = new Promise((resolve) => a!.child.once("exit", resolve))
      a!.child.kill("SIGKILL")
      await exited

      await b!.call("setClock", { ms: 31_000 })
      const fresh = await b!.call("probe", { expectedOwner: A, claimant: B, checkedAtMs: 31_000 })
      expect(fresh).toEqual({ expectedOwner: A, checkedAtMs: 31_000, kind: "same-host-pid-dead" })
      expect(await b!.call("claimAndOwn", { runId, expected: stamped, owner: B, nowMs: 31_000, evidence: fresh }))
        .toEqual({ _tag: "HeartbeatFresh" })
      await b!.call("setClock", { ms: 31_001 })
      expect(await b!.call("claimAndOwn", { runId, expected: stamped, owner: B, nowMs: 31_001 })).toEqual({
        _tag: "EvidenceRequired"
      })
      const wrongKind = { expectedOwner: A, checkedAtMs: 31_001, kind: "cross-host-unreachable-stale" }
      expect(await b!.call("claimAndOwn", { runId, expected: stamped, owner: B, nowMs: 31_001, evidence: wrongKind }))
        .toEqual({ _tag: "EvidenceRequired" })
      const probed = await b!.call("probe", { expectedOwner: A, claimant: B, checkedAtMs: 31_001 })
      expect(await b!.call("claimAndOwn", { runId, expected: stamped, owner: B, nowMs: 31_001, evidence: probed }))
        .toEqual({ _tag: "Activated" })
      const row = await b!.call("get", { runId })
      expect([row.status, row.owner, row.heartbeatAtMs]).toEqual(["running", B, 31_001])
      const facts = await b!.call("facts", { runId })
      expect(facts).toEqual([
        { type: "claimed", payload: { runId, owner: A, grantedAtMs: 0 } },
        { type: "activated", payload: { runId, owner: A, grantedAtMs: 0 } },
        { type: "stolen", payload: { runId, owner: B, grantedAtMs: 31_001 } },
        { type: "activated", payload: { runId, owner: B, grantedAtMs: 31_001 } }
      ])
    })
  })

  it("journal check 30: two processes racing Consensus.claim on 200 runs: exactly one Granted per run, never an error", async () => {
    await withWorkers(makeTarget, 2, async ([a, b]) => {
      const runIds = Array.from({ length: 200 }, (_, i) => `run-${i}`)
      await a!.call("createMany", { runIds })
      const [first, second] = await Promise.all([
        a!.call<Array<string>>("consensusClaimEach", { runIds, owner: { hostId: "proc-1", pid: a!.pid, nonce: "a" } }),
        b!.call<Array<string>>("consensusClaimEach", { runIds, owner: { hostId: "proc-2", pid: b!.pid, nonce: "b" } })
      ])
      // The row's claim names the reported winner, read back through either process.
      const claims = await b!.call<Array<string | null>>("claimsOf", { runIds })
      for (let i = 0; i < runIds.length; i++) {
        expect([first![i], second![i]].sort(), runIds[i]).toEqual(["Granted", "Rejected:already_claimed"])
        expect(claims[i], runIds[i]).toBe(first![i] === "Granted" ? "proc-1" : "proc-2")
      }
    })
  })

  it("journal check 31: no zombie append across processes: the owner's accepted entries precede the thief's marker", async () => {
    await withWorkers(makeTarget, 2, async ([owner, thief]) => {
      const A = { hostId: "host-a", pid: owner!.pid, nonce: "a" }
      const B = { hostId: "host-b", pid: thief!.pid, nonce: "b" }
      const stale = 30_001
      await owner!.call("create", { runId: "r" })
      expect(await owner!.call("consensusOwn", { runId: "r", owner: A, nowMs: 0 })).toEqual({ _tag: "Activated" })
      const append = (i: number) => owner!.call<{ seq: number }>("emitDurable", { runId: "r", sourceId: "owner", owner: A, payload: { i } })
      // The owner appends back to back; once 21 entries are in, the thief steals while the appends go on.
      const accepted: Array<number> = []
      let marker: Promise<{ seq: number }> | undefined
      let thiefFailure: unknown
      let fenced: string | undefined
      while (fenced === undefined) {
        if (thiefFailure !== undefined) throw thiefFailure
        try {
          accepted.push((await append(accepted.length)).seq)
        } catch (error) {
          fenced = (error as WorkerError).detail?.code ?? String(error)
        }
        if (accepted.length === 21 && marker === undefined) {
          marker = thief!.call<{ seq: number }>("stealWithMarker", {
            runId: "r",
            sourceId: "thief",
            thief: B,
            nowMs: stale,
            evidence: { expectedOwner: A, checkedAtMs: stale, kind: "cross-host-unreachable-stale" }
          })
          marker.catch((error) => (thiefFailure = error))
        }
      }
      expect(fenced).toBe("fence_lost")
      const markerSeq = (await marker!).seq
      expect(accepted.length).toBeGreaterThanOrEqual(21)
      expect(Math.max(...accepted)).toBeLessThan(markerSeq)
      const after: Array<string> = []
      for (let k = 0; k < 3; k++) {
        after.push(await append(k).then(() => "accepted", (error: WorkerError) => error.detail?.code))
      }
      expect(after).toEqual(["fence_lost", "fence_lost", "fence_lost"])
      const stored = await thief!.call<Array<{ seq: number; sourceId: string }>>("journalEntries", { runId: "r" })
      expect(stored.map((e) => e.seq)).toEqual(Array.from({ length: stored.length }, (_, i) => i))
      expect(stored.filter((e) => e.sourceId === "owner").length).toBe(accepted.length)
      expect(stored[stored.length - 1]).toEqual({ seq: markerSeq, sourceId: "thief" })
    })
  })
}
