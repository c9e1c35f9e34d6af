/**
 * A torture worker process: `worker.ts <sqlite <file> | pg <url> <schema>> <steps> <stepMs> <slots>`.
 *
 * `slots` fibers (and one scout for stale runs) each loop: pick a live run, own it (a pending run by `claimAndOwn`; a stale run by
 * `claimAndOwn` or `steal` + `activate` with liveness evidence; a stale pending claim by
 * `recoverClaim`), keep its lease alive with `Heartbeat.keepAlive`, commit its remaining steps and
 * complete it (half the runs ignore the lease loop's stop, see `own`). Every fenced write also lands on the run's journal stream (see `checker.ts`). The
 * database is migrated by the parent. Reports counts as JSON lines on stdout; never exits on its own.
 */
import * as PgDatabase from "@baton/database/PgDatabase"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import type * as Consensus from "@baton/journal/Consensus"
import * as Journal from "@baton/journal/Journal"
import * as SqlConsensus from "@baton/journal/SqlConsensus"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as Heartbeat from "@baton/run-store/Heartbeat"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Clock, Effect, Fiber, Layer, ManagedRuntime } from "effect"
import { randomUUID } from "node:crypto"

const args = process.argv.slice(2)
const dialect = args[0]!
const [target, schema] = dialect === "sqlite" ? [args[1]!, undefined] : [args[1]!, args[2]!]
const rest = dialect === "sqlite" ? args.slice(2) : args.slice(3)
const steps = Number(rest[0])
const stepMs = Number(rest[1])
const slots = Number(rest[2])

// Generous retries: a stopped peer can hold the SQLite write lock for longer than the stale cutoff.
const writer = { maxAttempts: 60, baseDelayMs: 5, maxDelayMs: 250 }
const database = dialect === "sqlite"
  ? SqliteDatabase.layer({ filename: target, writer })
  : PgDatabase.layer({ url: target, schema: schema!, maxConnections: slots + 2, writer })
const runtime = ManagedRuntime.make(
  Layer.provideMerge(
    Layer.mergeAll(RunStore.layerWith, AttemptStore.layer, SqlJournal.layerWith()),
    Layer.provideMerge(SqlConsensus.layer, database)
  )
)

type Owner = { readonly hostId: string; readonly pid: number; readonly nonce: string }
const keyOf = (o: Owner) => `${o.hostId}/${o.pid}/${o.nonce}`
const staleAfterMs = 30_000
const sourceId = "torture"

const counts: Record<string, number> = {}
const debug = process.env["BATON_TORTURE_DEBUG"] === "1"
const bump = (name: string) => {
  counts[name] = (counts[name] ?? 0) + 1
  if (debug) process.stderr.write(`${new Date().toISOString()} ${process.pid} ${name}\n`)
}
/** A few distinct failure texts (codes and messages only: no stored values are in them). */
const samples = new Set<string>()
const sample = (cause: Cause.Cause<unknown>) => {
  if (samples.size >= 8) return
  // The library's message, then the tags, codes and driver routines down the cause chain.
  const links: Array<string> = []
  let current: unknown = Cause.squash(cause)
  for (let i = 0; i < 8 && typeof current === "object" && current !== null; i++) {
    const link = current as { _tag?: unknown; code?: unknown; routine?: unknown; message?: unknown; cause?: unknown }
    // Below the SqlError is the driver's own error: its message says what failed (the torture's data is synthetic).
    const driver = links.some((l) => l.startsWith("SqlError")) && typeof link.message === "string"
      ? link.message.slice(0, 160)
      : undefined
    links.push([link._tag, link.code, link.routine, driver].filter((x) => typeof x === "string").join(" "))
    current = link.cause
  }
  samples.add(`${Cause.pretty(cause).split("\n")[0]!.slice(0, 200)} [${links.join(" < ")}]`)
}
const report = () => process.stdout.write(JSON.stringify({ pid: process.pid, counts, errors: [...samples] }) + "\n")

/** Fails the enclosing transaction (so it rolls back) with the outcome that refused it. */
class Refused {
  readonly _tag = "Refused"
  constructor(readonly what: string) {}
}

const now = Effect.map(Clock.currentTimeMillis, Math.floor)

const pidDead = (pid: number) => {
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH"
  }
}

/** Evidence about `expected` as seen by `claimant` at `atMs`: a dead pid on this host, else an expired lease. */
const evidenceAbout = (expected: Owner, claimant: Owner, atMs: number): Consensus.LivenessEvidence => ({
  expectedOwner: expected,
  checkedAtMs: atMs,
  kind: expected.hostId === claimant.hostId && pidDead(expected.pid) ? "same-host-pid-dead" : "lease-expired"
})

const emit = (runId: string, owner: Owner, eventType: string, payload: Record<string, unknown>) =>
  Effect.flatMap(Journal.Journal, (j) => j.emitDurable({ runId, sourceId, eventType, payload: { owner: keyOf(owner), ...payload } }, owner))

/** The acquisition's marker joins the activation's transaction: its seq is the new owner's fence token. */
const marked = (runId: string, owner: Owner, activation: Effect.Effect<{ readonly _tag: string }, unknown, any>) =>
  Effect.flatMap(Journal.Journal, (j) =>
    j.transact(
      Effect.gen(function*() {
        const outcome = yield* activation
        if (outcome._tag !== "Activated") return { tag: outcome._tag, fence: undefined }
        const receipt = yield* emit(runId, owner, "torture.acquired", {})
        return { tag: "Activated", fence: receipt.seq as number }
      }),
      { key: runId }
    ))

/** Tries to own `runId`; the fence token when it did. */
const acquire = (runId: string) =>
  Effect.gen(function*() {
    const store = yield* RunStore.RunStore
    const row = yield* store.get(runId)
    const owner: Owner = { hostId: "torture", pid: process.pid, nonce: randomUUID() }
    const at = yield* now
    if (row.claim !== null && row.claimedAtMs !== null) {
      // A claimant that died between steal and activate leaves a claim only recoverClaim clears.
      if (row.claimedAtMs >= at - staleAfterMs) return undefined
      const recovered = yield* store.recoverClaim(
        runId,
        row.claim,
        row.claimedAtMs,
        owner,
        at,
        evidenceAbout(row.claim, owner, at)
      )
      bump(`recoverClaim.${recovered._tag}`)
      return undefined
    }
    if (row.status === "pending") {
      const got = yield* marked(runId, owner, store.claimAndOwn(runId, row, owner, at))
      bump(`claim.${got.tag}`)
      return got.fence === undefined ? undefined : { owner, fence: got.fence }
    }
    if (row.status !== "running" || row.owner === null || row.heartbeatAtMs === null) return undefined
    if (row.heartbeatAtMs >= at - staleAfterMs) return undefined
    const evidence = evidenceAbout(row.owner, owner, at)
    if (Math.random() < 0.5) {
      const got = yield* marked(runId, owner, store.claimAndOwn(runId, row, owner, at, evidence))
      bump(`takeover.${got.tag}`)
      return got.fence === undefined ? undefined : { owner, fence: got.fence }
    }
    const stolen = yield* store.steal(runId, row, owner, at, evidence)
    bump(`steal.${stolen._tag}`)
    if (stolen._tag !== "Claimed") return undefined
    const got = yield* marked(runId, owner, store.activate(runId, owner, stolen.claimedAtMs, row))
    bump(`activate.${got.tag}`)
    if (got.fence === undefined) yield* store.abandonClaim(runId, owner, stolen.claimedAtMs)
    return got.fence === undefined ? undefined : { owner, fence: got.fence }
  })

/** The steps not yet committed, then completion; stops at the first refusal. */
const work = (runId: string, owner: Owner, fence: number) =>
  Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const attempts = yield* AttemptStore.AttemptStore
    const store = yield* RunStore.RunStore
    const sql = yield* SqlClient.SqlClient
    const page = yield* journal.entries({ runId, eventTypes: ["torture.step"], limit: 1000 })
    const done = new Set(page.entries.map((e) => (e.payload as { step: number }).step))
    for (let step = 0; step < steps; step++) {
      if (done.has(step)) continue
      const stepKeyDigest = `step-${step}`
      const attempt = (yield* attempts.list(runId)).filter((a) => a.stepKeyDigest === stepKeyDigest).length
      const put = yield* attempts.put({
        runId,
        stepKeyDigest,
        attempt,
        state: "running",
        startedAtMs: yield* now,
        meta: { owner: keyOf(owner) }
      }, owner)
      if (put._tag !== "Inserted") return yield* Effect.fail(new Refused(`put.${put._tag}`))
      yield* Effect.sleep(Math.round(stepMs * (0.5 + Math.random())))
      yield* journal.transact(
        Effect.gen(function*() {
          const receipt = yield* emit(runId, owner, "torture.step", { fence, step })
          yield* sql`INSERT INTO torture_effects (run_id, step, owner, fence, journal_seq)
            VALUES (${runId}, ${step}, ${keyOf(owner)}, ${fence}, ${receipt.seq})`
          const finished = yield* attempts.finish({
            runId,
            stepKeyDigest,
            attempt,
            state: "succeeded",
            finishedAtMs: yield* now,
            outcome: { seq: receipt.seq }
          }, owner)
          if (finished._tag !== "Finished") return yield* Effect.fail(new Refused(`finish.${finished._tag}`))
        }),
        { key: runId }
      )
      bump("step")
    }
    yield* journal.transact(
      Effect.gen(function*() {
        yield* emit(runId, owner, "torture.completed", { fence })
        const t = yield* store.transitionOwned(runId, owner, "completed", JSON.stringify({ steps }))
        if (t._tag !== "Transitioned") return yield* Effect.fail(new Refused(`transition.${t._tag}`))
      }),
      { key: runId }
    )
    bump("completed")
  })

const own = (runId: string, owner: Owner, fence: number) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(work(runId, owner, fence))
    // Half the runs are worked stubbornly: the lease loop cannot stop the work, so an owner that
    // was stopped past the cutoff and deposed carries on writing, and only the fences refuse it.
    const stubborn = Math.random() < 0.5
    const watched = stubborn ? yield* Effect.fork(Effect.never) : fiber
    const lease = yield* Effect.fork(Heartbeat.keepAlive(runId, owner, watched, { heartbeatAtMs: yield* now }))
    const exit = yield* Fiber.await(fiber)
    yield* Fiber.interrupt(lease)
    if (stubborn) yield* Fiber.interrupt(watched)
    if (exit._tag === "Failure") {
      const failure = Cause.failureOption(exit.cause)
      if (Cause.isInterruptedOnly(exit.cause)) bump("work.interrupted")
      else if (failure._tag === "Some" && failure.value instanceof Refused) bump(`refused.${failure.value.what}`)
      else if (failure._tag === "Some" && (failure.value as { code?: string }).code === "fence_lost") bump("refused.fence_lost")
      else {
        bump("work.error")
        sample(exit.cause)
      }
    }
  })

const inFlight = new Set<string>()

const candidates = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ readonly run_id: string }>`SELECT run_id FROM flows_runs WHERE status IN ('pending', 'running')
    ORDER BY random() LIMIT 16`)

/** Runs whose lease or pending claim is stale: what a scout takes over. */
const staleRuns = Effect.flatMap(Effect.zip(SqlClient.SqlClient, now), ([sql, at]) =>
  sql<{ readonly run_id: string }>`SELECT run_id FROM flows_runs
    WHERE (status = 'running' AND heartbeat_at_ms < ${at - staleAfterMs})
      OR (claimed_at_ms IS NOT NULL AND claimed_at_ms < ${at - staleAfterMs})
    ORDER BY random() LIMIT 16`)

/**
 * One fiber's loop. The scout looks only for stale runs, so a run whose owner is stopped is taken
 * over soon after the cutoff, while the old owner is still frozen and will write when it wakes.
 */
const slot = (scout: boolean) => Effect.gen(function*() {
  while (true) {
    const rows = yield* (scout ? staleRuns : candidates).pipe(Effect.orElseSucceed(() => []))
    let owned = false
    for (const { run_id } of rows) {
      if (inFlight.has(run_id)) continue
      inFlight.add(run_id)
      const got = yield* acquire(run_id).pipe(
        Effect.catchAllCause((cause) => Effect.sync(() => (bump("acquire.error"), sample(cause), undefined)))
      )
      if (got !== undefined) {
        owned = true
        yield* own(run_id, got.owner, got.fence).pipe(Effect.catchAllCause((cause) => Effect.sync(() => (bump("own.error"), sample(cause)))))
      }
      inFlight.delete(run_id)
      if (owned) break
    }
    if (!owned) yield* Effect.sleep(scout || rows.length === 0 ? 500 : 100)
  }
})

setInterval(report, 1000).unref()
runtime.runPromise(Effect.void).then(() => {
  process.stdout.write(JSON.stringify({ ready: true, pid: process.pid }) + "\n")
  return runtime.runPromise(
    Effect.all([slot(true), ...Array.from({ length: slots }, () => slot(false))], { concurrency: "unbounded" })
  )
}).catch((error) => {
  process.stderr.write(`torture worker failed: ${String(error)}\n`)
  process.exit(1)
})
