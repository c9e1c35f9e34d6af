/** One sweep tick of a host: cancels, signals, delegations, work discovery. */
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Consensus from "@baton/journal/Consensus"
import * as JournalEvent from "@baton/journal/JournalEvent"
import type * as Journal from "@baton/journal/Journal"
import type * as OwnerId from "@baton/journal/OwnerId"
import * as Ownership from "@baton/run-store/Ownership"
import * as RunStore from "@baton/run-store/RunStore"
import { Cause, Clock, Duration, Effect, Option } from "effect"
import * as HostIdentity from "../HostIdentity.js"
import type * as ProcessLiveness from "../ProcessLiveness.js"
import { nodeSource } from "./executorJournal.js"
import { markEnd } from "./executorState.js"
import type { HostCore } from "./hostCore.js"
import { skipsForDrift } from "./hostDrift.js"
import { isQueueReason, logFailure, logLostRace, settledElsewhere } from "./hostRaces.js"
import { deliverSignal, takeUp } from "./hostSignals.js"
import * as LiveIncarnations from "./liveIncarnations.js"

const skewMs = Duration.toMillis(Consensus.heartbeatSkewAllowance)

/** The sweep's memory across ticks: cancels being settled. */
export interface SweepMemory {
  readonly cancelling: Set<string>
}

export const makeMemory = (): SweepMemory => ({ cancelling: new Set() })

const guarded = (what: string, runId: string, effect: Effect.Effect<unknown, unknown>): Effect.Effect<void> =>
  // Whatever the step logs (a drift skip, a catalog load) names the run it was working on.
  (runId === "" ? effect : Effect.annotateLogs(effect, { runId })).pipe(
    Effect.asVoid,
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.interrupt : logFailure(`sweep: ${what}`, runId, cause)
    )
  )

/** The settle control's `interrupt` runs: also append `flows.engine.interrupted` in the same transaction. */
const cancelSettle = (journal: Journal.Service, runId: string) =>
<A, E, R>(effect: Effect.Effect<A, E, R>) =>
  journal.transact(
    Effect.gen(function*() {
      const summary = yield* effect
      const interruptedAtMs = yield* Clock.currentTimeMillis
      yield* journal.emitDurableUnfenced({
        runId,
        sourceId: nodeSource,
        eventType: JournalEvent.EventTypes.engineInterrupted,
        payload: { outcome: "cancelled", interruptedAtMs }
      } as JournalEvent.Input)
      return summary
    }),
    { key: runId }
  )

/** Step 1: cancel requests of runs driven here. */
const cancels = (core: HostCore, memory: SweepMemory) =>
  Effect.forEach(Array.from(core.driven.values()), (entry) => {
    const state = entry.control.state
    if (state === undefined || memory.cancelling.has(entry.runId)) return Effect.void
    return guarded(
      "cancel",
      entry.runId,
      Effect.gen(function*() {
        const row = yield* core.runStore.get(entry.runId)
        if (row.cancelRequestedAtMs === null) return
        const nowMs = yield* Clock.currentTimeMillis
        yield* core.runStore.acknowledgeCancel(entry.runId, state.run.owner, nowMs)
        markEnd(state, "cancelled")
        memory.cancelling.add(entry.runId)
        yield* Effect.forkDaemon(
          core.runtime.interrupt(entry.runId, cancelSettle(core.journal, entry.runId) as never).pipe(
            Effect.catchAllCause((cause) =>
              logFailure("cancel settle", entry.runId, cause, { warning: "cancel settle failed" })
            ),
            Effect.ensuring(Effect.sync(() => memory.cancelling.delete(entry.runId)))
          )
        )
      })
    )
  }, { discard: true })

const servedFlowIds = (core: HostCore) =>
  core.flows().pipe(Effect.map((flows) => flows.map((flow) => flow.id)), Effect.orElseSucceed(() => []))

/** Step 2: pending signal commands of runs whose flow is served here. */
const signals = (core: HostCore) =>
  Effect.gen(function*() {
    const served = new Set(yield* servedFlowIds(core))
    const commands = yield* core.runtime.pendingSignals
    for (const command of commands) {
      yield* guarded(
        "signal delivery",
        command.runId,
        Effect.gen(function*() {
          const summary = yield* core.runtime.getRun(command.runId)
          if (!served.has(summary.flowId)) return
          const answer = yield* deliverSignal(core, {
            commandId: command.commandId,
            token: command.token,
            runId: command.runId,
            signal: command.signal,
            principal: command.principal
          })
          if (answer === "delivered") yield* core.runtime.settleSignal(command.commandId, "delivered")
          else if (answer === "no-match" || answer === "refused") {
            yield* core.runtime.settleSignal(command.commandId, "rejected")
          }
        })
      )
    }
  })

/** Step 3: resume delegations. */
const delegations = (core: HostCore) =>
  Effect.gen(function*() {
    const pending = yield* core.runtime.pendingResumes
    for (const delegation of pending) {
      if (core.capacity() <= 0) return
      if (core.driven.has(delegation.runId)) continue
      yield* takeUp(core, delegation.runId, delegation, "delegation")
    }
  })

/**
 * Step 4: work discovery (stale owners, orphaned claims, then released runs in claim order). A queue
 * whose claim was refused as paused or full is passed over for the rest of the pass, and so is one at
 * this host's own limit for it.
 */
export const discovery = (core: HostCore) =>
  Effect.gen(function*() {
    const capacity = core.capacity()
    if (capacity <= 0 || !core.accepting) return
    const flowIds = yield* servedFlowIds(core)
    if (flowIds.length === 0) return
    const nowMs = yield* Clock.currentTimeMillis
    const behind = (newestHeartbeatAtMs: number | undefined) =>
      newestHeartbeatAtMs !== undefined && newestHeartbeatAtMs > nowMs + skewMs
        ? Effect.as(
          Effect.logWarning(
            `this host's clock is ${Math.round((newestHeartbeatAtMs - nowMs) / 1000)} s behind the database's lease stamps`
          ),
          true
        )
        : Effect.succeed(false)
    // Queues this host can take no more runs of: left out of every read below, so a backlog in one
    // never fills the batch or the page and hides the runs of another.
    const limited = Array.from(core.queueLimits.keys())
    const skipped = new Set(limited.filter((queue) => !core.queueRoom(queue)))
    // The common case first, as one batch: the leading released runs up to the first of a limited
    // queue. The rest, in the same order, and everything a failed batch left, go one at a time below.
    const batch = yield* core.runtime.claimNext({
      flowIds,
      nowMs,
      limit: Math.min(RunStore.claimAndOwnManyMax, capacity),
      exceptQueues: limited.filter((queue) => !skipped.has(queue)),
      skipQueues: Array.from(skipped)
    }).pipe(
      Effect.tapError((error) => Effect.logDebug(`sweep: batch claim failed (${error._tag}); claiming one at a time`)),
      Effect.option
    )
    if (Option.isSome(batch)) {
      if (yield* behind(batch.value.newestHeartbeatAtMs)) return
      for (const claimed of batch.value.claimed) {
        const { summary } = claimed
        yield* core.startDrive(summary.runId, summary.flowId, "released", null, claimed.queue, {
          summary,
          plan: claimed.plan,
          fence: claimed.fence,
          heartbeatAtMs: claimed.heartbeatAtMs,
          neverDriven: claimed.neverDriven
        })
      }
      if (core.capacity() <= 0 || !core.accepting) return
    }
    const self = HostIdentity.ownerOf(core.identity)
    const refused = new Set<string>()
    let earlier = 0
    // A page that ends in runs of queues this host passed over (now at its limit, or refused) is read
    // again without them: each further page leaves out one more queue, so at most one per limited queue
    // (and per refused one) beyond the first.
    for (;;) {
      const limit = Math.min(500, 2 * core.capacity())
      const page = yield* core.runtime.hostCandidates({ flowIds, nowMs, limit, skipQueues: [...skipped, ...refused] })
      if (yield* behind(page.newestHeartbeatAtMs)) return
      const left = skipped.size + refused.size
      for (const candidate of page.candidates) {
        if (core.capacity() <= 0 || !core.accepting) break
        if (core.driven.has(candidate.runId)) continue
        // Recovering an orphaned claim starts no drive here, so no limit applies to it.
        if (candidate.kind !== "orphaned-claim") {
          if (refused.has(candidate.queue)) continue
          if (!core.queueRoom(candidate.queue)) {
            skipped.add(candidate.queue)
            continue
          }
        }
        yield* guarded(
          "claim",
          candidate.runId,
          claimCandidate(core, candidate, self, (n) => (earlier += n), () => refused.add(candidate.queue))
        )
      }
      // Read on only when this page was full and a queue was newly left out of it.
      if (skipped.size + refused.size === left || page.candidates.length < limit) break
      if (core.capacity() <= 0 || !core.accepting) break
    }
    if (earlier > 0) yield* Effect.logInfo(`found ${earlier} runs owned by an earlier process with this pid`)
  })

/** Whether a failed claim was refused by its run's queue (paused, or at its global limit). */
export const queueRefused = (error: unknown): boolean =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "ClaimLost" &&
  isQueueReason((error as { readonly reason?: unknown }).reason)

/** Whether `owner` is this process (same host id, pid and incarnation). */
const ownLease = (core: HostCore, owner: OwnerId.OwnerId) =>
  owner.hostId === core.identity.hostId && owner.pid === core.identity.pid &&
  HostIdentity.isOwnNonce(core.identity, owner.nonce)

/** Probe answers that mean the owner's process is gone (an earlier incarnation, no pid, a zombie, a reused pid). */
const deadReasons: ReadonlySet<ProcessLiveness.Reason> = new Set([
  "previous-incarnation",
  "pid-gone",
  "pid-zombie",
  "pid-reused"
])

/**
 * The evidence kind a takeover rests on, for `baton.run.taken-over` (docs/design/fencing-and-leases.md):
 * `same-host-pid-dead` only when the probe finds the same-host owner's process gone;
 * `lease-expired` for another host, for this very process resuming its own lapsed lease, and
 * for a hung owner whose pid is alive but whose lease is older than `takeOverHungOwnersAfter`.
 */
const takeoverEvidence = (
  core: HostCore,
  self: OwnerId.OwnerId,
  from: OwnerId.OwnerId,
  heartbeatAtMs: number | null,
  nowMs: number
): Effect.Effect<"same-host-pid-dead" | "lease-expired"> => {
  if (from.hostId !== self.hostId || ownLease(core, from)) return Effect.succeed("lease-expired")
  if (core.liveness === undefined) return Effect.succeed("same-host-pid-dead")
  return Effect.map(
    core.liveness.probe(from, { claimant: self, heartbeatAtMs, nowMs }),
    (verdict) => deadReasons.has(verdict.reason) ? "same-host-pid-dead" : "lease-expired"
  )
}

const claimCandidate = (
  core: HostCore,
  candidate: ControlRuntime.HostCandidate,
  self: OwnerId.OwnerId,
  countEarlier: (n: number) => void,
  queueRefusal: () => void
) =>
  Effect.gen(function*() {
    const runId = candidate.runId
    switch (candidate.kind) {
      case "orphaned-claim": {
        if (candidate.claim === undefined || candidate.claimedAtMs === undefined) return
        const nowMs = yield* Clock.currentTimeMillis
        const alive = yield* core.check(candidate.claim, {
          claimant: self,
          heartbeatAtMs: candidate.claimedAtMs,
          nowMs
        })
        if (alive) return
        yield* core.runStore.recoverClaim(
          runId,
          candidate.claim,
          candidate.claimedAtMs,
          self,
          nowMs,
          Ownership.evidenceFor(candidate.claim, self, nowMs)
        )
        return
      }
      case "released": {
        if (yield* skipsForDrift(core, runId)) return
        const claimed = yield* Effect.either(core.runtime.resume(runId, { scope: "any" }))
        if (claimed._tag === "Left") {
          if (queueRefused(claimed.left)) queueRefusal()
          return
        }
        if (settledElsewhere(claimed.right)) return yield* logLostRace("sweep: claim", runId, "settled")
        // The claim answered the run's summary: the drive does not read it again.
        yield* core.startDrive(runId, candidate.flowId, "released", null, candidate.queue, { summary: claimed.right })
        return
      }
      case "stale-owner": {
        const from = candidate.owner
        if (
          from !== undefined && from.hostId === self.hostId && from.pid === self.pid && !ownLease(core, from) &&
          !LiveIncarnations.isLiveHere(from.nonce)
        ) countEarlier(1)
        if (yield* skipsForDrift(core, runId)) return
        const claimed = yield* Effect.either(core.runtime.resume(runId, { scope: "any" }))
        if (claimed._tag === "Left") return
        if (settledElsewhere(claimed.right)) return yield* logLostRace("sweep: takeover", runId, "settled")
        const nowMs = yield* Clock.currentTimeMillis
        const fence = yield* core.runtime.claimFence(runId)
        const owner = JSON.parse(fence) as OwnerId.OwnerId
        if (from !== undefined) {
          yield* core.journal.emitDurable(
            {
              runId,
              sourceId: nodeSource,
              eventType: "baton.run.taken-over",
              payload: {
                from: { hostId: from.hostId, pid: from.pid, nonce: from.nonce },
                evidence: yield* takeoverEvidence(core, self, from, candidate.heartbeatAtMs ?? null, nowMs),
                leaseAgeMs: candidate.heartbeatAtMs === undefined ? null : nowMs - candidate.heartbeatAtMs
              }
            } as JournalEvent.Input,
            owner
          ).pipe(
            // The takeover stands without its entry; say so rather than losing it quietly.
            Effect.catchAll((error) =>
              Effect.logWarning("could not journal baton.run.taken-over; the takeover goes on").pipe(
                Effect.annotateLogs({ runId, code: error.code })
              )
            )
          )
        }
        yield* core.startDrive(runId, candidate.flowId, "takeover", from ?? null, candidate.queue, { summary: claimed.right })
        return
      }
    }
  })

const everything: ControlRuntime.HostProbe = { signals: true, resumes: true, candidates: true }

/**
 * One sweep tick: cancels, signals, delegations, then discovery. One probe first says which of signals, delegations and
 * discovery have anything to read, so an idle host's tick is that one statement (cancels read only runs
 * driven here); a failed probe reads them all, as a tick did before.
 */
export const tick = (core: HostCore, memory: SweepMemory): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* cancels(core, memory)
    if (!core.accepting) return
    const flowIds = yield* servedFlowIds(core)
    const nowMs = yield* Clock.currentTimeMillis
    const work = yield* core.runtime.hostProbe({ flowIds, nowMs }).pipe(
      Effect.tapError((error) => Effect.logDebug(`sweep: probe failed (${error._tag}); reading everything`)),
      Effect.orElseSucceed(() => everything)
    )
    if (work.signals) yield* guarded("signals", "", signals(core))
    if (work.resumes) yield* guarded("delegations", "", delegations(core))
    if (work.candidates) yield* guarded("discovery", "", discovery(core))
  })
