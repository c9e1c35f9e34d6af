/** Waits for signals and approvals, and parking. */
import * as ControlExecutor from "@baton/control/ControlExecutor"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import type * as ControlSchema from "@baton/control/ControlSchema"
import { Effect, Schema } from "effect"
import * as crypto from "node:crypto"
import { durable, failJournal, flushLossy, withPrelude, writePrelude } from "./executorJournal.js"
import { checkName, isLost, recordReserved, stepDigest } from "./executorStep.js"
import { type DriveState, endDrive } from "./executorState.js"
import type { Json } from "./executorTypes.js"

const emptyEnvelope: ControlSchema.Envelope = { capabilities: [], flows: [], budget: {} }

/** hex sha256 of a wait token: `PendingWait.tokenDigest`. */
export const tokenDigest = (token: string): string => crypto.createHash("sha256").update(token).digest("hex")

/**
 * Park the run on a wait: fenced `baton.run.parked` and `ControlRuntime.park` in one journal
 * transaction (the park spends the fence), then end the drive (`parked`).
 */
export const park = (
  state: DriveState,
  reason: "event" | "approval",
  name: string,
  token: string,
  request: Json | undefined
): Effect.Effect<never> =>
  flushLossy(state).pipe(Effect.zipRight(withPrelude(
    state,
    state.services.journal.transact(
      Effect.gen(function*() {
        yield* durable(state, "baton.run.parked", { reason, name })
        yield* state.services.runtime.park(state.run.runId, state.fence, {
          reason,
          token,
          ...(request === undefined ? {} : { request })
        })
      }),
      { key: state.run.runId }
    )
  ))).pipe(
    Effect.catchAll((error) => failJournal(state, error)),
    Effect.zipRight(endDrive(state, "parked"))
  )

const completedOutcome = (state: DriveState, key: string): { value?: unknown } | undefined => {
  const latest = state.latest.get(stepDigest(key))
  return latest?.state === "completed" ? (latest.outcome as { value?: unknown } | undefined) ?? {} : undefined
}

/** `Step.waitForSignal` over the drive state. */
export const waitForSignal = <A, AE>(
  state: DriveState,
  name: string,
  options: { readonly schema?: Schema.Schema<A, AE>; readonly request?: Json } | undefined
): Effect.Effect<A> =>
  Effect.gen(function*() {
    yield* checkName(state, name, "wait")
    const key = `$wait:${name}`
    const decode = (payload: unknown) =>
      options?.schema === undefined
        ? Effect.succeed(payload as A)
        : Schema.decodeUnknown(options.schema)(payload)
    const memo = completedOutcome(state, key)
    if (memo !== undefined) {
      return yield* decode(memo.value).pipe(Effect.orDie)
    }
    // Signal settlements and bindings are writes of their own: the drive's opening entry goes first.
    yield* writePrelude(state)
    const { runtime, journal } = state.services
    const runId = state.run.runId
    const deliver = (command: ControlRuntime.SignalCommand) =>
      Effect.gen(function*() {
        const decoded = yield* Effect.either(decode(command.signal.payload))
        if (decoded._tag === "Left") {
          yield* Effect.logWarning(`signal ${command.commandId} for wait ${name} refused by its schema`).pipe(
            Effect.annotateLogs({ runId })
          )
          if (command.state === "pending") {
            // The refusal is the run's history, not only a log line: its journal entry commits with the
            // settlement (never the payload, which is a stored value).
            yield* flushLossy(state)
            yield* journal.transact(
              Effect.gen(function*() {
                yield* runtime.settleSignal(command.commandId, "rejected")
                yield* durable(state, "baton.signal.rejected", { commandId: command.commandId, name, reason: "schema" })
              }),
              { key: runId }
            )
          }
          return undefined
        }
        yield* journal.transact(
          Effect.gen(function*() {
            if (command.state === "pending") yield* runtime.settleSignal(command.commandId, "delivered")
            yield* recordReserved(state, key, "completed", { outcome: { value: command.signal.payload } })
          }),
          { key: runId }
        )
        return { value: decoded.right }
      })
    // A token binds at most one command, ever (docs/design/control.md), and a refused one keeps holding it.
    // So the wait stays open under its next attempt's token (`#2`, `#3`, …): walk the attempts whose
    // token is already bound, answering from the first bound command the schema accepts, up to the
    // first unbound token, which is this wait's open token.
    let attempt = 1
    let token = ControlExecutor.waitToken(state.run.flowId, runId, name, attempt)
    for (;;) {
      const [command] = yield* runtime.signalCommands({ runId, waitToken: token, limit: 1 })
      if (command === undefined) break
      if (command.state === "pending" || command.state === "delivered") {
        const answer = yield* deliver(command)
        if (answer !== undefined) return answer.value
      }
      token = ControlExecutor.waitToken(state.run.flowId, runId, name, ++attempt)
    }
    const unbound = yield* runtime.signalCommands({ runId, name, waitToken: null, state: "pending" })
    for (const command of unbound) {
      const got = yield* runtime.bindSignal(command.commandId, token)
      if (got !== token) continue
      const answer = yield* deliver({ ...command, token })
      if (answer !== undefined) return answer.value
      token = ControlExecutor.waitToken(state.run.flowId, runId, name, ++attempt)
    }
    return yield* park(state, "event", name, token, options?.request)
  }).pipe(
    Effect.catchAll((error): Effect.Effect<never> =>
      isLost(error) ? endDrive(state, "lease-lost") : failJournal(state, error)
    )
  )

/** `Step.waitForApproval` over the drive state. */
export const waitForApproval = (
  state: DriveState,
  requestId: string,
  options: { readonly request?: Json } | undefined
): Effect.Effect<void, ControlRuntime.ApprovalDenied> =>
  Effect.gen(function*() {
    yield* checkName(state, requestId, "approval")
    const key = `$approval:${requestId}`
    const memo = completedOutcome(state, key)
    const denial = (value: unknown) => {
      const v = value as { tokenId: string; decisionPrincipal: ControlSchema.Principal; reason?: string }
      return new ControlRuntime.ApprovalDenied({
        tokenId: v.tokenId,
        decisionPrincipal: v.decisionPrincipal,
        ...(v.reason === undefined ? {} : { reason: v.reason })
      })
    }
    if (memo !== undefined) {
      const value = memo.value as { decision?: string } | undefined
      if (value?.decision === "denied") return yield* Effect.fail(denial(value))
      return
    }
    yield* writePrelude(state).pipe(Effect.catchAll((error) => failJournal(state, error)))
    const runId = state.run.runId
    const token = ControlExecutor.waitToken(state.run.flowId, runId, requestId, 1)
    const envelope = (state.envelope ?? emptyEnvelope) as ControlSchema.Envelope
    const decision = yield* state.services.runtime.registerApproval({
      _tag: "Node",
      runId,
      requestId,
      digest: tokenDigest(token),
      envelope
    }).pipe(Effect.catchAll((error) => failJournal(state, error)))
    switch (decision._tag) {
      case "Approved": {
        yield* recordReserved(state, key, "completed", {
          outcome: { value: { decision: "approved", tokenId: decision.tokenId, decisionPrincipal: decision.decisionPrincipal } }
        }).pipe(Effect.catchAll((e) => isLost(e) ? endDrive(state, "lease-lost") : failJournal(state, e)))
        return
      }
      case "Denied": {
        const value = {
          decision: "denied",
          tokenId: decision.tokenId,
          decisionPrincipal: decision.decisionPrincipal,
          ...(decision.reason === undefined ? {} : { reason: decision.reason })
        }
        yield* recordReserved(state, key, "completed", { outcome: { value } }).pipe(
          Effect.catchAll((e) => isLost(e) ? endDrive(state, "lease-lost") : failJournal(state, e))
        )
        return yield* Effect.fail(denial(value))
      }
      default:
        return yield* park(state, "approval", requestId, token, options?.request)
    }
  })
