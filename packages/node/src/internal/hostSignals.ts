/** Signal delivery and the delegation take-up rule of the host (docs/design/control.md, Resume and delegation). */
import type * as ControlError from "@baton/control/ControlError"
import type * as ControlSchema from "@baton/control/ControlSchema"
import * as Consensus from "@baton/journal/Consensus"
import type * as OwnerId from "@baton/journal/OwnerId"
import { Clock, Duration, Effect } from "effect"
import * as HostIdentity from "../HostIdentity.js"
import type { HostCore } from "./hostCore.js"
import { skipsForDrift } from "./hostDrift.js"
import { logFailure, logLostRace, settledElsewhere } from "./hostRaces.js"
import { tokenDigest } from "./executorWaits.js"

const staleAfterMs = Duration.toMillis(Consensus.heartbeatStaleAfter)

const decodeFence = (fence: string | undefined): OwnerId.OwnerId | undefined => {
  if (fence === undefined) return undefined
  try {
    const value = JSON.parse(fence) as OwnerId.OwnerId
    return typeof value?.hostId === "string" && typeof value.pid === "number" && typeof value.nonce === "string"
      ? value
      : undefined
  } catch {
    return undefined
  }
}

/** Whether `owner` is this very process (control's same-process test with the incarnation). */
export const isThisProcess = (core: HostCore, owner: OwnerId.OwnerId): boolean =>
  owner.hostId === core.identity.hostId && owner.pid === core.identity.pid &&
  HostIdentity.isOwnNonce(core.identity, owner.nonce)

/**
 * May this host take up a resume delegation? (a) the parker is this process; (b) it carries
 * consent and the parker is dead; (c) it stood longer than stale-after; (d) the parker is
 * another process on this host that the probe reports dead.
 */
export const takeUpAllowed = (
  core: HostCore,
  summary: ControlSchema.RunSummary,
  delegation: { readonly requestedAtMs: number; readonly consent?: number | undefined }
): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    const parker = decodeFence(summary.parkedBy)
    if (parker === undefined) return true
    if (isThisProcess(core, parker)) return true
    if (delegation.requestedAtMs < nowMs - staleAfterMs) return true
    const sameHost = parker.hostId === core.identity.hostId
    if (delegation.consent === undefined && !sameHost) return false
    const alive = yield* core.check(parker, {
      claimant: HostIdentity.ownerOf(core.identity),
      heartbeatAtMs: null,
      nowMs
    })
    return !alive
  })

/**
 * A run's summary is read in more than one statement, so a claim committing between them shows the
 * run still parked with its waits already cleared. Only a second read that shows the same park
 * (same `updatedAt`) without a wait of that name is a real no-match.
 */
const stillParkedWithout = (core: HostCore, first: ControlSchema.RunSummary, name: string) =>
  Effect.map(core.runtime.getRun(first.runId), (again) =>
    again.status === first.status && again.updatedAt === first.updatedAt &&
    !(again.pendingWaits ?? []).some((w) => w.name === name))

/** Host `deliverSignal` (docs/design/control.md, Signals). */
export const deliverSignal = (
  core: HostCore,
  input: {
    readonly commandId?: string | undefined
    readonly token?: string | null | undefined
    readonly runId: string
    readonly signal: ControlSchema.SignalPayload
    readonly principal?: ControlSchema.Principal | undefined
  }
): Effect.Effect<"delivered" | "no-match" | "refused" | "unknown", ControlError.PersistenceError> =>
  Effect.gen(function*() {
    const runtime = core.runtime
    const summary = yield* runtime.getRun(input.runId)
    const wait = (summary.pendingWaits ?? []).find((w) => w.name === input.signal.name)
    if (wait === undefined) {
      // A bound command is judged by the drive of its wait, never here.
      if (input.token !== undefined && input.token !== null) return "unknown" as const
      if (summary.status !== "parked" && summary.status !== "waiting-approval") return "unknown" as const
      return (yield* stillParkedWithout(core, summary, input.signal.name)) ? "no-match" as const : "unknown" as const
    }
    if (input.commandId === undefined) return "unknown" as const
    if (wait.reason === "approval") {
      const principal = input.principal ?? (yield* runtime.stampPrincipal())
      const authorized = yield* runtime.authorizeApproval({
        principal,
        target: {
          _tag: "Node",
          runId: wait.runId,
          requestId: input.signal.name,
          digest: wait.tokenDigest ?? tokenDigest(wait.token),
          envelope: { capabilities: [], flows: [], budget: {} }
        },
        decision: "approved",
        scope: "once"
      }).pipe(Effect.as(true), Effect.catchTag("Unauthorized", () => Effect.succeed(false)))
      if (!authorized) return "refused" as const
    }
    // Already bound to this wait by an earlier offer: its resume was requested then; the drive settles it.
    if (input.token === wait.token && wait.reason !== "approval") return "unknown" as const
    const bound = yield* runtime.bindSignal(input.commandId, wait.token)
    if (bound !== wait.token) {
      // The wait's token is held by a command no drive has judged yet: its payload may still be
      // refused by the wait's schema, which reopens the wait, so offer this one again later.
      const [holder] = yield* runtime.signalCommands({ runId: wait.runId, waitToken: wait.token, limit: 1 })
      return bound === null && wait.reason !== "approval" && holder?.state === "pending"
        ? "unknown" as const
        : "no-match" as const
    }
    const sequence = yield* runtime.requestResume(wait.runId)
    yield* takeUp(core, wait.runId, { sequence, requestedAtMs: Number.MAX_SAFE_INTEGER }, "signal")
    // A signal wait checks the payload against its schema only in the drive, which then settles the
    // command `delivered` or `rejected`: settling it `delivered` here would overtake a
    // refusal. An approval wait has no schema, and its drive does not read signals.
    return wait.reason === "approval" ? "delivered" as const : "unknown" as const
  }).pipe(
    Effect.catchAll((error) =>
      error._tag === "PersistenceError" ? Effect.fail(error) : Effect.succeed("unknown" as const)
    )
  ) as Effect.Effect<"delivered" | "no-match" | "refused" | "unknown", ControlError.PersistenceError>

/**
 * Take a delegation up when the rule allows and the run's flow is served here: drift check,
 * `resume(runId, { scope: "any" })`, drive, then `clearResume(runId, sequence)`.
 */
export const takeUp = (
  core: HostCore,
  runId: string,
  delegation: { readonly sequence: number; readonly requestedAtMs: number; readonly consent?: number | undefined },
  cause: "signal" | "delegation"
): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    if (core.mode !== "host" || !core.accepting || core.driven.has(runId) || core.capacity() <= 0) return false
    const summary = yield* core.runtime.getRun(runId)
    if (summary.status !== "parked" && summary.status !== "waiting-approval" && summary.status !== "accepted") {
      return false
    }
    const flow = yield* core.flowFor(summary.flowId)
    if (flow === undefined) return false
    if (!(yield* takeUpAllowed(core, summary, delegation))) return false
    const queue = yield* core.queueOf(runId)
    if (!core.queueRoom(queue)) return false
    if (yield* skipsForDrift(core, runId)) return false
    const claimed = yield* core.runtime.resume(runId, { scope: "any" })
    if (settledElsewhere(claimed)) {
      yield* logLostRace("delegation take-up", runId, "settled")
      return false
    }
    const started = yield* core.startDrive(runId, summary.flowId, cause, null, queue, { summary: claimed })
    if (started) yield* core.runtime.clearResume(runId, delegation.sequence)
    return started
  }).pipe(
    Effect.annotateLogs({ runId }),
    Effect.catchAllCause((failure) =>
      Effect.as(logFailure("delegation take-up", runId, failure, { warning: "delegation not taken up", limit: 300 }), false)
    )
  )
