/**
 * Fenced ownership over the run store (docs/design/fencing-and-leases.md): transitions, claims, resume (join-or-claim),
 * parks, interrupts and code drift.
 */
import * as Ownership from "@baton/run-store/Ownership"
import { Effect, Either, Fiber } from "effect"
import { ClaimLost, CodeDrift, PersistenceError, RunNotFound } from "../ControlError.js"
import type { RunStatus, RunSummary } from "../ControlSchema.js"
import { isTerminalStatus } from "../ControlSchema.js"
import type { DurableFlow, OwnerIdentity, OwnershipError, ParkRequest, ResumeScope } from "../ControlRuntime.js"
import { claimGate } from "./queueSql.js"
import { checkPark, parkStatus } from "./runtimeChecks.js"
import type { SqlContext } from "./sqlContext.js"
import { fenceOf, ownerOf, persist } from "./sqlContext.js"
import { idSet } from "./sqlFragments.js"
import { runExpressions } from "./sqlListing.js"
import { projectRows } from "./sqlProjection.js"
import type { RawRow, RunRow, StoreStatus } from "./sqlRows.js"
import { durableSummary, readRow, requireRow, runColumns, runFrom, storeStatusOf, summaryOf, toRow, withLaunchedBy } from "./sqlRows.js"
import { settleSignalsOfFinishedRun } from "./sqlSignals.js"

type Adopted = { readonly executionDigest?: string | undefined; readonly engineVersion?: string | undefined }
type Code = Adopted

const codeOf = (summary: RunSummary): Code => ({
  ...(summary.executionDigest === undefined ? {} : { executionDigest: summary.executionDigest }),
  ...(summary.engineVersion === undefined ? {} : { engineVersion: summary.engineVersion })
})

const hasCode = (code: Code) => code.executionDigest !== undefined || code.engineVersion !== undefined

/**
 * The summary a transition to `status` (store status `store`, epoch ms `at`) by `owner` writes: its durable
 * members, the owner's fence while it runs, the parker's fence when it parks.
 */
export const transitioned = (
  summary: RunSummary,
  owner: OwnerIdentity,
  status: RunStatus,
  store: StoreStatus,
  at: number
): RunSummary => {
  const { ownerId, parkedBy: _p, ...rest } = durableSummary(summary)
  const parks = store === "suspended" && !(status === "accepted")
  return {
    ...rest,
    status,
    updatedAt: at,
    ...(store === "running" && ownerId !== undefined ? { ownerId } : {}),
    ...(parks ? { parkedBy: fenceOf(owner) } : {})
  }
}

/** Ownership operations bound to one runtime context. */
export const makeOwnership = (ctx: SqlContext) => {
  const fibers = new Map<string, Fiber.RuntimeFiber<unknown, unknown>>()

  // One run read on its own reports a corrupt stored value as the error it is.
  const project = (row: RunRow) =>
    Effect.flatMap(projectRows(ctx, [row]), (items) => {
      const { error, summary } = items[0]!
      return error === undefined ? Effect.succeed(summary) : Effect.fail(error)
    })

  const ownedByUs = (row: RunRow) => row.status === "running" && row.owner !== null && ctx.sameProcess(row.owner)

  /** CAS the status through the run store, writing the summary in the same statement, so the two never disagree. */
  const transition = (
    runId: string,
    owner: OwnerIdentity,
    summary: RunSummary,
    status: RunStatus,
    store: StoreStatus = storeStatusOf(status)
  ): Effect.Effect<RunSummary, OwnershipError> =>
    Effect.gen(function*() {
      const next = transitioned(summary, owner, status, store, yield* ctx.now)
      const write = ctx.store.transitionOwned(runId, owner, store, JSON.stringify(next)).pipe(persist("transition a run"))
      // A finished run settles its pending signals in the same write: nothing can deliver them anymore.
      const outcome = yield* isTerminalStatus(status)
        ? ctx.write(
          runId,
          "finish a run",
          Effect.tap(write, (done) => done._tag === "Transitioned" ? settleSignalsOfFinishedRun(ctx, runId) : Effect.void)
        )
        : write
      switch (outcome._tag) {
        case "Transitioned":
          return next
        case "NotFound":
          return yield* Effect.fail(new RunNotFound({ runId }))
        default:
          return yield* Effect.fail(new ClaimLost({ runId }))
      }
    })

  const deadOwner = (row: RunRow) =>
    Effect.gen(function*() {
      const isAlive = ctx.options.isAlive
      if (isAlive === undefined || row.owner === null) return undefined
      const nowMs = yield* ctx.now
      const alive = yield* isAlive(row.owner, { claimant: ctx.owner, heartbeatAtMs: row.heartbeatAtMs, nowMs })
      return alive ? undefined : Ownership.evidenceFor(row.owner, ctx.owner, nowMs)
    })

  const claim = (row: RunRow, evidence?: Ownership.LivenessEvidence, adopted?: Adopted) =>
    Effect.gen(function*() {
      const runId = row.runId
      const claimant = yield* ctx.claimant
      const base = yield* summaryOf(row)
      return yield* ctx.write(
        runId,
        "claim a run",
        Effect.gen(function*() {
          const nowMs = evidence?.checkedAtMs ?? (yield* ctx.now)
          // A takeover of a running row adds no running run; anything else answers to its queue first,
          // except a run whose cancel is requested: that claim only settles it, so neither a paused
          // queue nor a full one may keep a cancel from landing.
          if (row.status !== "running" && row.cancelRequestedAtMs === null) {
            yield* claimGate(ctx.sql, runId, base.status === "accepted")
          }
          const outcome = yield* ctx.store.claimAndOwn(
            runId,
            { status: row.status, owner: row.owner, heartbeatAtMs: row.heartbeatAtMs },
            claimant,
            nowMs,
            evidence
          )
          if (outcome._tag === "NotFound") return yield* Effect.fail(new RunNotFound({ runId }))
          if (outcome._tag !== "Activated") return yield* Effect.fail(new ClaimLost({ runId, reason: outcome._tag }))
          // Claiming ends the park: clear the waiting columns under the new owner's fence.
          yield* ctx.sql`UPDATE flows_runs SET waiting_reason = NULL, waiting_token = NULL, waiting_request = NULL,
              waiting_wake_at_ms = NULL
            WHERE run_id = ${runId} AND status = 'running' AND owner_host_id = ${claimant.hostId}
              AND owner_pid = ${claimant.pid} AND owner_nonce = ${claimant.nonce}`
          return yield* transition(runId, claimant, { ...base, ...adopted, ownerId: fenceOf(claimant) }, "accepted")
        })
      )
    })

  const resumeWith = (
    runId: string,
    scope: ResumeScope,
    adopt: ((summary: RunSummary) => Effect.Effect<Adopted, CodeDrift | PersistenceError>) | undefined
  ): Effect.Effect<RunSummary, OwnershipError | CodeDrift> =>
    Effect.gen(function*() {
      const row = yield* requireRow(ctx, runId)
      const summary = yield* summaryOf(row)
      if (isTerminalStatus(summary.status) || row.status === "completed" || row.status === "failed" || row.status === "cancelled") {
        return yield* project(row)
      }
      if (ownedByUs(row)) return summary
      if (scope === "launched" && row.status === "suspended" && summary.parkedBy !== undefined) {
        const parker = ownerOf(summary.parkedBy)
        if (parker === undefined) {
          return yield* Effect.fail(new PersistenceError({ operation: "decode flows_runs.state_json", message: `run ${runId}: parkedBy is not a fence` }))
        }
        if (!ctx.sameProcess(parker)) {
          const isAlive = ctx.options.isAlive
          const nowMs = yield* ctx.now
          const alive = isAlive !== undefined && parker.hostId === ctx.owner.hostId
            ? yield* isAlive(parker, { claimant: ctx.owner, heartbeatAtMs: null, nowMs })
            : true
          if (alive) {
            return yield* Effect.fail(
              new ClaimLost({
                runId,
                reason: "parking host is alive or its liveness cannot be determined",
                parkedBy: { hostId: parker.hostId, pid: parker.pid }
              })
            )
          }
        }
      }
      if (scope === "launched" && !row.launched) return yield* Effect.fail(new ClaimLost({ runId }))
      let evidence: Ownership.LivenessEvidence | undefined
      if (row.status === "running") {
        evidence = yield* deadOwner(row)
        if (evidence === undefined) return yield* Effect.fail(new ClaimLost({ runId }))
      }
      const adopted = adopt === undefined ? undefined : yield* adopt(summary)
      return withLaunchedBy(row, yield* claim(row, evidence, adopted))
    })

  const resume = (runId: string, options?: { readonly scope?: ResumeScope | undefined }) =>
    resumeWith(runId, options?.scope ?? "any", undefined) as Effect.Effect<RunSummary, OwnershipError>

  const resumeAdopting = (runId: string, options?: { readonly scope?: ResumeScope | undefined }) =>
    resumeWith(runId, options?.scope ?? "any", (summary) =>
      Effect.gen(function*() {
        const flow = ctx.options.adoptFlow !== undefined
          ? yield* ctx.options.adoptFlow(summary.flowId, runId)
          : (yield* ctx.currentCatalog).find((f) => f.flowId === summary.flowId)
        if (flow === undefined) {
          return yield* Effect.fail(
            new CodeDrift({
              runId,
              flowId: summary.flowId,
              ...(summary.executionDigest === undefined ? {} : { recorded: summary.executionDigest }),
              ...(summary.engineVersion === undefined ? {} : { recordedEngine: summary.engineVersion })
            })
          )
        }
        const engineVersion = ctx.options.engineVersion ?? summary.engineVersion
        return {
          ...(flow.executionDigest === undefined ? {} : { executionDigest: flow.executionDigest }),
          ...(engineVersion === undefined ? {} : { engineVersion })
        }
      }))

  const claimFence = (runId: string) =>
    Effect.flatMap(requireRow(ctx, runId), (row) =>
      ownedByUs(row) ? Effect.succeed(fenceOf(row.owner!)) : Effect.fail(new ClaimLost({ runId })))

  const fencedOwner = (runId: string, fence: string) => {
    const owner = ownerOf(fence)
    return owner === undefined ? Effect.fail(new ClaimLost({ runId, reason: "fence does not decode" })) : Effect.succeed(owner)
  }

  const writeStatus = (runId: string, fence: string, status: RunStatus) =>
    Effect.gen(function*() {
      const row = yield* requireRow(ctx, runId)
      const owner = yield* fencedOwner(runId, fence)
      const summary = yield* summaryOf(row)
      return withLaunchedBy(row, yield* transition(runId, owner, summary, status))
    })

  const releasePending = (runId: string, fence: string) =>
    Effect.gen(function*() {
      const row = yield* requireRow(ctx, runId)
      const owner = yield* fencedOwner(runId, fence)
      const { ownerId: _o, ...summary } = yield* summaryOf(row)
      return withLaunchedBy(row, yield* transition(runId, owner, summary, "accepted", "suspended"))
    })

  const park = (runId: string, fence: string, wait: ParkRequest) =>
    Effect.gen(function*() {
      const { request } = yield* checkPark(wait)
      const owner = yield* fencedOwner(runId, fence)
      return yield* ctx.write(
        runId,
        "park a run",
        Effect.gen(function*() {
          const updated = yield* ctx.sql<{ run_id: string }>`UPDATE flows_runs
            SET waiting_reason = ${wait.reason}, waiting_token = ${wait.token}, waiting_request = ${request},
              waiting_wake_at_ms = NULL
            WHERE run_id = ${runId} AND status = 'running' AND owner_host_id = ${owner.hostId}
              AND owner_pid = ${owner.pid} AND owner_nonce = ${owner.nonce}
            RETURNING run_id`
          const row = yield* requireRow(ctx, runId)
          if (updated.length === 0) return yield* Effect.fail(new ClaimLost({ runId }))
          const summary = yield* summaryOf(row)
          return withLaunchedBy(row, yield* transition(runId, owner, summary, parkStatus(wait.reason)))
        })
      )
    })

  // No read: the caller drives a run it has just claimed, and an entry for a run id that names no run
  // is inert (nothing interrupts it) and leaves with its fiber.
  const registerFiber = (runId: string, fiber: Fiber.RuntimeFiber<unknown, unknown>) =>
    Effect.sync(() => {
      fibers.set(runId, fiber)
      fiber.addObserver(() => {
        if (fibers.get(runId) === fiber) fibers.delete(runId)
      })
    })

  const interrupt = (
    runId: string,
    settle: (effect: Effect.Effect<RunSummary, OwnershipError>) => Effect.Effect<RunSummary, OwnershipError> = (e) => e
  ) =>
    Effect.gen(function*() {
      const row = yield* requireRow(ctx, runId)
      const summary = yield* summaryOf(row)
      if (isTerminalStatus(summary.status)) return yield* project(row)
      if (!ownedByUs(row)) return yield* Effect.fail(new ClaimLost({ runId }))
      const original = row.owner!
      const fiber = fibers.get(runId)
      if (fiber !== undefined) {
        yield* Fiber.interrupt(fiber)
        if (fibers.get(runId) === fiber) fibers.delete(runId)
      }
      return yield* settle(
        ctx.write(
          runId,
          "settle an interrupted run",
          Effect.gen(function*() {
            const current = yield* requireRow(ctx, runId)
            const currentSummary = yield* summaryOf(current)
            if (isTerminalStatus(currentSummary.status)) return currentSummary
            return withLaunchedBy(current, yield* transition(runId, original, currentSummary, "cancelled"))
          })
        )
      )
    })

  // The code a run records: its own, else that of its nearest ancestor of the same flow recording one
  // (a trampoline round inherits its parent's), else none. `lookup` reads an ancestor's row.
  const inheritedCode = (
    row: RunRow,
    summary: RunSummary,
    lookup: (runId: string) => Effect.Effect<RunRow | undefined, PersistenceError>
  ) =>
    Effect.gen(function*() {
      const own = codeOf(summary)
      if (hasCode(own)) return { flowId: summary.flowId, code: own }
      const visited = new Set([row.runId])
      let parentId = row.parentRunId ?? summary.parentRunId
      while (parentId !== undefined && !visited.has(parentId)) {
        visited.add(parentId)
        const parent = yield* lookup(parentId)
        if (parent === undefined) break
        const parentSummary = yield* summaryOf(parent)
        if (parentSummary.flowId !== summary.flowId) break
        const inherited = codeOf(parentSummary)
        if (hasCode(inherited)) return { flowId: summary.flowId, code: inherited }
        parentId = parent.parentRunId ?? parentSummary.parentRunId
      }
      return { flowId: summary.flowId, code: own }
    })

  const recordedCode = (runId: string) =>
    Effect.gen(function*() {
      const row = yield* requireRow(ctx, runId)
      return yield* inheritedCode(row, yield* summaryOf(row), (id) => readRow(ctx, id))
    })

  type Pinned = (flowId: string, digest: string) => Effect.Effect<boolean | undefined, PersistenceError>

  // The drift rule, once: the recorded flow code against the catalog's (a pinned flow overrides it:
  // `pinned` is the pin hook's answer, `undefined` without one), and the recorded engine against this
  // runtime's.
  const driftRule = (
    runId: string,
    flowId: string,
    code: Code,
    catalog: ReadonlyArray<DurableFlow>,
    pinned: boolean | undefined
  ): CodeDrift | undefined => {
    const recorded = code.executionDigest
    const entry = catalog.find((f) => f.flowId === flowId)
    let current = entry?.executionDigest
    let flowGone = entry === undefined
    if (pinned === true) {
      current = recorded
      flowGone = false
    } else if (pinned === false) {
      current = undefined
      flowGone = true
    }
    const flowDrift = recorded !== undefined && (flowGone || current !== recorded)
    const recordedEngine = code.engineVersion
    const currentEngine = ctx.options.engineVersion
    const engineDrift = recordedEngine !== undefined && currentEngine !== undefined && recordedEngine !== currentEngine
    if (!flowDrift && !engineDrift) return undefined
    return new CodeDrift({
      runId,
      flowId,
      ...(flowDrift ? { recorded } : {}),
      ...(flowDrift && current !== undefined ? { current } : {}),
      ...(engineDrift ? { recordedEngine, currentEngine } : {})
    })
  }

  // `driftRule` after asking the pin hook, when there is one and the run records a flow digest.
  const driftOf = (
    runId: string,
    flowId: string,
    code: Code,
    catalog: ReadonlyArray<DurableFlow>,
    pinnedFlow: Pinned | undefined
  ): Effect.Effect<CodeDrift | undefined, PersistenceError> =>
    pinnedFlow === undefined || code.executionDigest === undefined
      ? Effect.succeed(driftRule(runId, flowId, code, catalog, undefined))
      : Effect.map(pinnedFlow(flowId, code.executionDigest), (pinned) => driftRule(runId, flowId, code, catalog, pinned))

  const codeDrift = (runId: string): Effect.Effect<CodeDrift | undefined, RunNotFound | PersistenceError> =>
    Effect.gen(function*() {
      const { code, flowId } = yield* recordedCode(runId)
      return yield* driftOf(runId, flowId, code, yield* ctx.currentCatalog, ctx.options.pinnedFlow)
    })

  // The rows of `runIds` and of their ancestors up to the first one recording code (64 levels at most;
  // a longer chain reads the rest one row at a time), in one statement.
  const lineageRows = (runIds: ReadonlyArray<string>) => {
    const { sql } = ctx
    const x = runExpressions(ctx)
    const records = sql`(${x.isControl} AND (${x.member("$.executionDigest")} IS NOT NULL
      OR ${x.member("$.engineVersion")} IS NOT NULL))`
    return sql<RawRow>`WITH RECURSIVE lineage(run_id, next_id, open, depth) AS (
        SELECT r.run_id, ${x.parent(false)}, 1, 0 FROM flows_runs r WHERE r.run_id IN ${idSet(ctx, runIds)}
        UNION
        SELECT r.run_id, ${x.parent(false)}, CASE WHEN ${records} THEN 0 ELSE 1 END, l.depth + 1
          FROM lineage l JOIN flows_runs r ON r.run_id = l.next_id WHERE l.open = 1 AND l.depth < 64
      )
      SELECT ${runColumns(ctx)} FROM ${runFrom(ctx)} WHERE r.run_id IN (SELECT run_id FROM lineage)`.pipe(
      Effect.map((rows) => new Map(rows.map((raw) => [String(raw.run_id), toRow(raw)]))),
      persist("read code drift")
    )
  }

  const codeDrifts = (runs: ReadonlyArray<RunSummary>): Effect.Effect<ReadonlyMap<string, CodeDrift>, PersistenceError> =>
    Effect.gen(function*() {
      const recorded = new Map<string, { readonly flowId: string; readonly code: Code }>()
      const walk: Array<string> = []
      // A summary without code of its own (an unreadable one among them) is read again with its lineage,
      // as `codeDrift` reads it; one that records its code needs no read.
      for (const summary of runs) {
        const own = codeOf(summary)
        if (hasCode(own)) recorded.set(summary.runId, { flowId: summary.flowId, code: own })
        else walk.push(summary.runId)
      }
      if (walk.length > 0) {
        const rows = yield* Effect.either(lineageRows(walk))
        if (rows._tag === "Right") {
          const lookup = (id: string) => (rows.right.has(id) ? Effect.succeed(rows.right.get(id)) : readRow(ctx, id))
          for (const runId of walk) {
            const row = rows.right.get(runId)
            if (row === undefined) continue
            const found = yield* Effect.either(Effect.flatMap(summaryOf(row), (summary) => inheritedCode(row, summary, lookup)))
            if (found._tag === "Right") recorded.set(runId, found.right)
          }
        }
      }
      const catalog = yield* ctx.currentCatalog
      const pinnedFlow = ctx.options.pinnedFlow
      // The pin hook is asked once per flow and digest of the batch.
      const pins = new Map<string, Either.Either<boolean | undefined, PersistenceError>>()
      const pinned: Pinned | undefined = pinnedFlow === undefined ? undefined : (flowId, digest) =>
        Effect.suspend(() => {
          const key = JSON.stringify([flowId, digest])
          const known = pins.get(key)
          if (known !== undefined) return known
          return Effect.tap(Effect.either(pinnedFlow(flowId, digest)), (answer) => Effect.sync(() => pins.set(key, answer)))
            .pipe(Effect.flatten)
        })
      const drifts = new Map<string, CodeDrift>()
      for (const [runId, { code, flowId }] of recorded) {
        // Without a pin hook to ask, the rule needs no Effect step per run.
        if (pinned === undefined || code.executionDigest === undefined) {
          const drift = driftRule(runId, flowId, code, catalog, undefined)
          if (drift !== undefined) drifts.set(runId, drift)
          continue
        }
        const drift = yield* Effect.either(driftOf(runId, flowId, code, catalog, pinned))
        if (drift._tag === "Right" && drift.right !== undefined) drifts.set(runId, drift.right)
      }
      return drifts
    })

  return {
    fibers,
    project,
    transition,
    resume,
    resumeAdopting,
    claimFence,
    writeStatus,
    releasePending,
    park,
    registerFiber,
    interrupt,
    recordedCode: (runId: string) => Effect.map(recordedCode(runId), (r) => r.code),
    codeDrift,
    codeDrifts
  }
}
