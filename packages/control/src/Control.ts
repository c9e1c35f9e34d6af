/**
 * The control facade: what operators and host code call. Every mutation takes
 * an idempotency key, is fingerprinted, is journaled in the same transaction
 * as the state change it describes, and is answered with a `Receipt`.
 *
 * Executor calls (launch hand-off, signal delivery, re-driving) happen after
 * the mutation committed, outside every write transaction.
 *
 * @since 0.1.0
 */
import * as Journal from "@baton/journal/Journal"
import * as RunStore from "@baton/run-store/RunStore"
import { Clock, Context, Effect, Layer, Option } from "effect"
import * as ControlError from "./ControlError.js"
import * as ControlExecutor from "./ControlExecutor.js"
import * as ControlRuntime from "./ControlRuntime.js"
import * as ControlSchema from "./ControlSchema.js"
import { admit, admitId, keyRule, reasonRule, requireKey } from "./internal/facadeBoundary.js"
import { displayCard } from "./internal/facadeDisplay.js"
import * as Inputs from "./internal/facadeInputs.js"
import { list as listImpl } from "./internal/facadeList.js"
import { emit, emitFresh, keyed, mutate, persistence, transact } from "./internal/facadeMutation.js"
import * as Runs from "./internal/facadeRuns.js"

/**
 * A submitted principal. The facade stamps it with the runtime's clock, so
 * `stampedAt` may be omitted (it is ignored when given).
 *
 * @since 0.1.0
 * @category models
 */
export interface PrincipalInput {
  readonly id: string
  readonly kind: string
  readonly stampedAt?: number | undefined
}

/**
 * Launch an approved plan (`Plan`) or resume a run (`Resume`).
 *
 * @since 0.1.0
 * @category models
 */
export type RunInput =
  & (
    | {
      readonly _tag: "Plan"
      readonly planId: string
      readonly digest: string
      readonly envelope: ControlSchema.Envelope
      readonly idempotencyKey: string
    }
    | {
      readonly _tag: "Resume"
      readonly runId: ControlSchema.RunId
      readonly idempotencyKey: string
      readonly reason?: string | undefined
      readonly allowCodeDrift?: boolean | undefined
    }
  )
  & { readonly principal?: PrincipalInput | undefined }

/**
 * An approval decision request: the card's (or node's) approval payload, the
 * deciding principal and an optional reason (1–1,000 well-formed characters).
 *
 * @since 0.1.0
 * @category models
 */
export interface ApprovalInput {
  readonly target: ControlSchema.ApprovalTarget
  readonly scope: ControlSchema.GrantScope
  readonly idempotencyKey: string
  readonly principal?: PrincipalInput | undefined
  readonly reason?: string | undefined
}

/**
 * A steer message for a run; `message.runId` must equal `runId`.
 *
 * @since 0.1.0
 * @category models
 */
export interface SteerInput {
  readonly runId: ControlSchema.RunId
  readonly message: Omit<ControlSchema.SteerMessage, "principal"> & { readonly principal: PrincipalInput }
  readonly idempotencyKey: string
}

/**
 * A signal for a run's wait named `signal.name`.
 *
 * @since 0.1.0
 * @category models
 */
export interface SignalInput {
  readonly runId: ControlSchema.RunId
  readonly signal: ControlSchema.SignalPayload
  readonly idempotencyKey: string
  readonly principal?: PrincipalInput | undefined
}

/**
 * A keyed mutation of one run (cancel); the optional reason is 1–1,000
 * well-formed characters, like an approval's.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunMutationInput {
  readonly runId: ControlSchema.RunId
  readonly idempotencyKey: string
  readonly reason?: string | undefined
  readonly principal?: PrincipalInput | undefined
}

/**
 * A keyed resume; `allowCodeDrift` adopts the code on disk now.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResumeInput extends RunMutationInput {
  readonly allowCodeDrift?: boolean | undefined
}

type E = ControlError.ControlError

/**
 * The facade.
 *
 * - `plan`: a plan card (idempotent per key); `control.plan.created` once per plan.
 * - `run`: launch an approved plan (`Accepted`, `AlreadyApplied`, `Parked` while
 *   undecided) or resume a run; fails `LaunchFailed` when the executor refuses.
 * - `approve` / `deny`: decide a plan or node approval; `Unauthorized` is
 *   journaled as `control.approval.refused` and changes nothing.
 * - `steer`: queue a steer message, waking a run parked on an event.
 * - `signal`: admit a signal command and offer it to the executor
 *   (`NoMatchingWait` when no wait of that name is open).
 * - `cancel`: record an attributed cancel request and interrupt the run
 *   (`Terminal{cancelled}` when it settled here, else `Accepted`).
 * - `resume`: claim a parked run, or hand it to the live host that parked it
 *   (`Accepted{handedTo}` plus a resume delegation).
 * - `getRun`, `list`: projections (with a `codeDrift` view on live runs whose flow the catalog holds,
 *   or whose engine differs); a run id
 *   that is not 1..1024 well-formed characters fails `InvalidInput`.
 * - `plan` answers the card with its `inputSummary` redacted (journal `Redaction`).
 * - `start` / `startMany` (since 0.2.0): create runs of a flow that needs no approval, in one
 *   transaction, with an approved plan each; a run available now is handed to this process's executor
 *   when it has one, otherwise it waits released in its queue for a host's claim. `getRun` of a
 *   finished run carries its `result` (completed) or `error` (failed) as the engine recorded it.
 *
 * Bad input fails `InvalidInput` naming the field and the rule, and writes nothing.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly plan: (
    input: ControlRuntime.PlanInput
  ) => Effect.Effect<
    ControlSchema.PlanCard,
    ControlError.FlowNotFound | ControlError.InvalidInput | ControlError.PersistenceError
  >
  readonly run: (input: RunInput) => Effect.Effect<
    ControlSchema.Receipt,
    | ControlError.RunNotFound
    | ControlError.PlanNotFound
    | ControlError.PlanDenied
    | ControlError.PlanDigestMismatch
    | ControlError.EnvelopeMismatch
    | ControlError.ClaimLost
    | ControlError.CodeDrift
    | ControlError.LaunchFailed
    | ControlError.InvalidInput
    | ControlError.PersistenceError
  >
  readonly approve: (input: ApprovalInput) => Effect.Effect<ControlSchema.Receipt, ApprovalError>
  readonly deny: (input: ApprovalInput) => Effect.Effect<ControlSchema.Receipt, ApprovalError>
  readonly steer: (
    input: SteerInput
  ) => Effect.Effect<
    ControlSchema.Receipt,
    ControlError.RunNotFound | ControlError.InvalidInput | ControlError.PersistenceError
  >
  readonly signal: (input: SignalInput) => Effect.Effect<
    ControlSchema.Receipt,
    | ControlError.RunNotFound
    | ControlError.NoMatchingWait
    | ControlError.Unauthorized
    | ControlError.InvalidInput
    | ControlError.PersistenceError
  >
  readonly cancel: (
    input: RunMutationInput
  ) => Effect.Effect<
    ControlSchema.Receipt,
    ControlError.RunNotFound | ControlError.ClaimLost | ControlError.InvalidInput | ControlError.PersistenceError
  >
  readonly resume: (input: ResumeInput) => Effect.Effect<
    ControlSchema.Receipt,
    | ControlError.RunNotFound
    | ControlError.ClaimLost
    | ControlError.CodeDrift
    | ControlError.InvalidInput
    | ControlError.PersistenceError
  >
  readonly getRun: (
    runId: ControlSchema.RunId
  ) => Effect.Effect<
    ControlSchema.RunSummary,
    ControlError.RunNotFound | ControlError.InvalidInput | ControlError.PersistenceError
  >
  readonly list: (request: ControlSchema.ListRequest) => Effect.Effect<ControlSchema.ListResponse, E>
  readonly start: (input: StartInput) => Effect.Effect<Started, StartError>
  readonly startMany: (input: StartManyInput) => Effect.Effect<ReadonlyArray<Started>, StartError>
}

/**
 * Where and when started runs wait for a host: `queue` (default `"default"`, 1..128 characters
 * matching `/^[a-z0-9][a-z0-9._/-]{0,127}$/`), `priority` (integer, higher claimed first; default 0), `availableAt` (epoch ms; not
 * claimed before), `retry` (attempts and backoff after a failure), `parentRunId`.
 *
 * @since 0.2.0
 * @category models
 */
export interface StartOptions {
  readonly queue?: string | undefined
  readonly priority?: number | undefined
  readonly availableAt?: number | undefined
  readonly retry?: ControlRuntime.RetryPolicy | undefined
  readonly parentRunId?: ControlSchema.RunId | undefined
  readonly principal?: PrincipalInput | undefined
}

/**
 * A start of one run: the flow, its raw input (decoded by the flow's schema), and an optional
 * idempotency key (the same key and input answer the same run; other input fails `IdempotencyConflict`).
 *
 * @since 0.2.0
 * @category models
 */
export interface StartInput extends StartOptions {
  readonly flowId: string
  readonly input: unknown
  readonly idempotencyKey?: string | undefined
}

/**
 * A start of many runs of one flow in one transaction; `idempotencyKeys`, when given, holds one entry
 * (a key or `undefined`) per input.
 *
 * @since 0.2.0
 * @category models
 */
export interface StartManyInput extends StartOptions {
  readonly flowId: string
  readonly inputs: ReadonlyArray<unknown>
  readonly idempotencyKeys?: ReadonlyArray<string | undefined> | undefined
}

/**
 * A started run: its id, its status when the start answered, and `created` (false when an idempotency
 * key named an earlier run).
 *
 * @since 0.2.0
 * @category models
 */
export interface Started {
  readonly runId: ControlSchema.RunId
  readonly status: ControlSchema.RunStatus
  readonly created: boolean
}

/**
 * Errors of `start` and `startMany`: nothing was written.
 *
 * @since 0.2.0
 * @category models
 */
export type StartError =
  | ControlError.FlowNotFound
  | ControlError.ApprovalRequired
  | ControlError.IdempotencyConflict
  | ControlError.InvalidInput
  | ControlError.ClaimLost
  | ControlError.PersistenceError

/**
 * Errors of `approve` and `deny`.
 *
 * @since 0.1.0
 * @category models
 */
export type ApprovalError =
  | ControlError.PlanDigestMismatch
  | ControlError.EnvelopeMismatch
  | ControlError.AlreadyResolved
  | ControlError.PlanNotFound
  | ControlError.RunNotFound
  | ControlError.CodeDrift
  | ControlError.Unauthorized
  | ControlError.InvalidInput
  | ControlError.PersistenceError

/**
 * The facade service tag.
 *
 * @since 0.1.0
 * @category services
 */
export class Control extends Context.Tag("@baton/control/Control")<Control, Service>() {}

const terminalReceipt = (summary: ControlSchema.RunSummary): ControlSchema.Receipt => ({
  _tag: "Terminal",
  runId: summary.runId,
  status: summary.status
})

const accepted = (receiptId: string, runId?: string): ControlSchema.Receipt => ({
  _tag: "Accepted",
  receiptId,
  ...(runId !== undefined ? { runId } : {})
})

const isJsonObject = (value: unknown): value is Record<string, ControlSchema.Json> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const driftView = (drift: ControlError.CodeDrift): ControlSchema.CodeDriftView => ({
  ...(drift.recorded !== undefined ? { recorded: drift.recorded } : {}),
  ...(drift.current !== undefined ? { current: drift.current } : {}),
  ...(drift.recordedEngine !== undefined ? { recordedEngine: drift.recordedEngine } : {}),
  ...(drift.currentEngine !== undefined ? { currentEngine: drift.currentEngine } : {})
})

/**
 * The drift a read reports. A catalog that lacks the run's flow says nothing about the run's code (a
 * client's catalog need not hold every host's flows), so its flow part is left to the host that drives
 * the run; `codeDrift` itself still counts the flow as gone, which is what resuming here must refuse.
 */
const readDriftView = (
  drift: ControlError.CodeDrift,
  flows: ReadonlyArray<{ readonly flowId: string }>
): ControlSchema.CodeDriftView | undefined => {
  if (drift.current !== undefined || flows.some((f) => f.flowId === drift.flowId)) return driftView(drift)
  if (drift.recordedEngine === undefined) return undefined
  return {
    recordedEngine: drift.recordedEngine,
    ...(drift.currentEngine === undefined ? {} : { currentEngine: drift.currentEngine })
  }
}

/**
 * Builds the facade over a `ControlRuntime` and a `Journal`. A
 * `ControlExecutor` and a `RunStore` in the context are used when present
 * (without an executor launches are declined; without either, a cancel
 * request is not recorded in the store).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Service, never, ControlRuntime.ControlRuntime | Journal.Journal> = Effect.gen(
  function*() {
    const runtime = yield* ControlRuntime.ControlRuntime
    const journal = yield* Journal.Journal
    const executor = Option.getOrUndefined(yield* Effect.serviceOption(ControlExecutor.ControlExecutor))
    const store = Option.getOrUndefined(yield* Effect.serviceOption(RunStore.RunStore))
    const semaphore = yield* Effect.makeSemaphore(1)
    const host: Runs.Host = { runtime, journal, semaphore, executor, store }

    // Facade views (code drift) of a batch of runs: one `codeDrifts` for the live ones, no read per run.
    const decorateAll = (
      summaries: ReadonlyArray<ControlSchema.RunSummary>
    ): Effect.Effect<ReadonlyArray<ControlSchema.RunSummary>> => {
      const live = summaries.filter((summary) => !Runs.isTerminal(summary.status))
      if (live.length === 0) return Effect.succeed(summaries)
      return Effect.all([runtime.codeDrifts(live), runtime.listFlows]).pipe(
        Effect.map(([drifts, flows]) =>
          summaries.map((summary) => {
            const drift = drifts.get(summary.runId)
            const view = drift === undefined ? undefined : readDriftView(drift, flows)
            return view === undefined ? summary : { ...summary, codeDrift: view }
          })
        ),
        Effect.orElseSucceed(() => summaries)
      )
    }
    const decorate = (summary: ControlSchema.RunSummary): Effect.Effect<ControlSchema.RunSummary> =>
      Effect.map(decorateAll([summary]), (decorated) => decorated[0]!)

    const refuseDrift = (runId: string) =>
      Effect.flatMap(runtime.codeDrift(runId), (drift) => (drift === undefined ? Effect.void : Effect.fail(drift)))

    // ---- plan -------------------------------------------------------------
    const plan: Service["plan"] = (raw) =>
      Effect.gen(function*() {
        const input = yield* admit("plan", Inputs.PlanInput, raw, [keyRule("plan")])
        if (input.idempotencyKey !== undefined) yield* requireKey("plan", input.idempotencyKey)
        const body = Effect.gen(function*() {
          const outcome = yield* runtime.plan({ ...input, input: input.input })
          const card = outcome.card
          const partition = `plan:${card.planId}`
          let append = outcome.created
          if (!append) {
            const page = yield* journal.entries({ runId: partition, eventTypes: ["control.plan.created"], limit: 100 })
              .pipe(Effect.mapError(persistence("plan")))
            append = !page.entries.some((entry) => entry.sourceId === "@baton/control")
          }
          if (append) {
            yield* emit(host, partition, "control.plan.created", {
              planId: card.planId,
              flowId: card.flowId,
              digest: card.digest
            })
          }
          return card
        })
        const card = yield* semaphore.withPermits(1)(transact(host, "plan", body))
        return displayCard(card)
      })

    // ---- approve / deny ---------------------------------------------------
    const decide = (decision: "approved" | "denied") => (raw: ApprovalInput) =>
      Effect.gen(function*() {
        const operation = decision === "approved" ? "approve" : "deny"
        const input = yield* admit(operation, Inputs.ApprovalInput, raw, [
          keyRule(operation),
          reasonRule(operation)
        ])
        const keys = yield* keyed(host, operation, input, input.principal)
        const { key, principal } = keys
        const target = input.target
        const scope = input.scope
        const partition = target._tag === "Plan" ? `plan:${target.planId}` : target.runId
        // An old receipt or a settled run confers no authority: ask first.
        yield* runtime.authorizeApproval({ principal, target, decision, scope }).pipe(
          Effect.catchTag("Unauthorized", (refusal) =>
            emit(host, partition, "control.approval.refused", { decision, principal, scope, target }).pipe(
              Effect.zipRight(Effect.fail(refusal))
            ))
        )
        if (target._tag === "Node") {
          const existing = yield* runtime.getRun(target.runId).pipe(
            Effect.map((summary): ControlSchema.RunSummary | undefined => summary),
            Effect.catchTag("RunNotFound", () => Effect.succeed(undefined))
          )
          if (existing !== undefined && Runs.isTerminal(existing.status)) return terminalReceipt(existing)
        }
        let resumeSeq: number | undefined
        const receipt = yield* mutate(host, {
          ...keys,
          lockKey: target._tag === "Node" ? target.runId : undefined,
          replay: true,
          claimRunKey: false
        }, () =>
          Effect.gen(function*() {
            resumeSeq = undefined
            if (target._tag === "Node") yield* refuseDrift(target.runId)
            const token = yield* runtime.lookupApproval(target)
            yield* runtime.resolveApproval(token, decision, principal, scope, input.reason)
            if (decision === "approved") yield* runtime.installBulkGrant(token, target.envelope, scope)
            yield* emit(host, partition, `control.approval.${decision}`, {
              tokenId: token.tokenId,
              approvalTarget: token.target,
              target: target._tag,
              scope,
              envelope: target.envelope,
              principal,
              ...(input.reason !== undefined ? { reason: input.reason } : {})
            })
            if (target._tag === "Plan") return accepted(key)
            const seq = yield* runtime.requestResume(target.runId)
            yield* emit(host, target.runId, "control.run.resumed", { runId: target.runId })
            resumeSeq = seq
            return accepted(key, target.runId)
          }))
        const seq = resumeSeq
        if (target._tag === "Node" && seq !== undefined && executor !== undefined && receipt._tag === "Accepted") {
          yield* executor.resumeRun({ runId: target.runId }).pipe(
            Effect.flatMap((answer) => (answer === "resuming" ? runtime.clearResume(target.runId, seq) : Effect.void)),
            Effect.catchAllCause((cause) => Effect.logWarning("approval re-drive failed", { runId: target.runId, cause }))
          )
        }
        return receipt
      })

    // ---- resume (also `run` with a Resume input) ---------------------------
    const resumeRun = (operation: string, input: typeof Inputs.ResumeInput.Type) =>
      Effect.gen(function*() {
        // `run` with a Resume input shares `resume`'s keys.
        const keys = yield* keyed(host, operation, input, input.principal, "resume")
        const { key, principal } = keys
        const runId = input.runId
        const before = yield* runtime.getRun(runId)
        if (Runs.isTerminal(before.status)) return terminalReceipt(before)
        let claimed = false
        const receipt = yield* mutate(host, {
          ...keys,
          lockKey: runId,
          replay: true,
          claimRunKey: false
        }, () =>
          Effect.gen(function*() {
            claimed = false
            const current = yield* runtime.getRun(runId)
            if (Runs.isTerminal(current.status)) return terminalReceipt(current)
            if (input.allowCodeDrift !== true) yield* refuseDrift(runId)
            const attempt = input.allowCodeDrift === true
              ? runtime.resumeAdopting(runId, { scope: "launched" })
              : runtime.resume(runId, { scope: "launched" })
            type Outcome =
              | { readonly _tag: "Claimed"; readonly summary: ControlSchema.RunSummary }
              | { readonly _tag: "Handed"; readonly host: ControlSchema.RunHost }
              | { readonly _tag: "Unclaimed"; readonly summary: ControlSchema.RunSummary }
            const outcome: Outcome = yield* attempt.pipe(
              Effect.map((summary): Outcome => ({ _tag: "Claimed", summary })),
              Effect.catchTag("ClaimLost", (lost) => {
                if (lost.parkedBy !== undefined) {
                  return Effect.succeed<Outcome>({
                    _tag: "Handed",
                    host: { hostId: lost.parkedBy.hostId, pid: lost.parkedBy.pid }
                  })
                }
                if (lost.reason !== undefined) return Effect.fail(lost)
                return runtime.getRun(runId).pipe(
                  Effect.flatMap((now) =>
                    Runs.isLive(now) ? Effect.fail(lost) : Effect.succeed<Outcome>({ _tag: "Unclaimed", summary: now })
                  )
                )
              })
            )
            const status = outcome._tag === "Handed" ? current.status : outcome.summary.status
            const seq = yield* emit(host, runId, "control.run.resume", {
              runId,
              status,
              principal,
              ...(input.reason !== undefined ? { reason: input.reason } : {}),
              ...(outcome._tag === "Handed" ? { handedTo: outcome.host } : {})
            })
            switch (outcome._tag) {
              case "Handed": {
                yield* runtime.requestResume(runId, { consent: seq })
                return { _tag: "Accepted", receiptId: key, runId, handedTo: outcome.host } satisfies ControlSchema.Receipt
              }
              case "Unclaimed":
                return accepted(key, runId)
              case "Claimed":
                claimed = true
                return Runs.isTerminal(outcome.summary.status) ? terminalReceipt(outcome.summary) : accepted(key, runId)
            }
          }))
        if (claimed && executor !== undefined && receipt._tag === "Accepted") {
          const ours = yield* runtime.claimFence(runId).pipe(Effect.as(true), Effect.orElseSucceed(() => false))
          if (ours) {
            yield* executor.resumeRun({ runId }).pipe(
              Effect.catchAllCause((cause) => Effect.logWarning("resume re-drive failed", { runId, cause }))
            )
          }
        }
        return receipt
      })

    const resume: Service["resume"] = (raw) =>
      Effect.flatMap(admit("resume", Inputs.ResumeInput, raw, [keyRule("resume"), reasonRule("resume")]), (input) => resumeRun("resume", input))

    // ---- run ----------------------------------------------------------------
    const run: Service["run"] = (raw) =>
      Effect.gen(function*() {
        const input = yield* admit("run", Inputs.RunInput, raw, [keyRule("run"), reasonRule("run")])
        if (input._tag === "Resume") {
          const { _tag: _ignored, ...rest } = input
          return yield* resumeRun("run", rest)
        }
        const keys = yield* keyed(host, "run", input, input.principal)
        const { key, principal } = keys
        let started: { readonly plan: ControlRuntime.StoredPlan; readonly run: ControlSchema.RunSummary } | undefined
        // Keyed by the plan's journal partition, so launches of different plans never wait on each other;
        // the plan's approval is schema-wide and so still excludes its launch. An id too long for a lock
        // key names no plan (ids are `plan-<n>`) and launches schema-wide, to be refused.
        const planKey = `plan:${input.planId}`
        const receipt = yield* mutate(host, {
          ...keys,
          lockKey: planKey.length <= 1024 ? planKey : undefined,
          replay: true,
          claimRunKey: true
        }, () =>
          Effect.gen(function*() {
            started = undefined
            const result = yield* runtime.launch(input.planId, input.digest, input.envelope, principal)
            if (result._tag === "Parked") {
              return result.receipt._tag === "Parked"
                ? { ...result.receipt, receiptId: key }
                : result.receipt
            }
            const stored = yield* runtime.getPlan(input.planId)
            const decoded = stored.decodedInput
            const trigger = isJsonObject(decoded) && isJsonObject(decoded.trigger) ? decoded.trigger : undefined
            yield* emit(host, result.run.runId, "control.run.accepted", {
              runId: result.run.runId,
              planId: input.planId,
              digest: stored.card.digest,
              status: result.run.status,
              ...(trigger !== undefined ? { trigger } : {})
            })
            started = { plan: stored, run: result.run }
            return accepted(key, result.run.runId)
          }))
        const launched = started
        if (launched !== undefined) {
          yield* Runs.hand(host, launched.plan, launched.run)
        } else if (receipt._tag === "AlreadyApplied" && receipt.runId !== undefined) {
          yield* Runs.relaunchStranded(host, receipt.runId)
        }
        return receipt
      })

    // ---- steer --------------------------------------------------------------
    const steer: Service["steer"] = (raw) =>
      Effect.gen(function*() {
        const input = yield* admit("steer", Inputs.SteerInput, raw, [keyRule("steer")])
        const runId = input.runId
        if (input.message.runId !== runId) {
          return yield* new ControlError.InvalidInput({
            issue: `message.runId: must be ${JSON.stringify(runId)}, received ${JSON.stringify(input.message.runId)}`
          })
        }
        const keys = yield* keyed(host, "steer", input, input.message.principal)
        const { key, principal } = keys
        const message: ControlSchema.SteerMessage = { ...input.message, principal }
        let woke = false
        const receipt = yield* mutate(host, {
          ...keys,
          lockKey: runId,
          replay: true,
          claimRunKey: false
        }, () =>
          Effect.gen(function*() {
            woke = false
            const current = yield* runtime.getRun(runId)
            if (Runs.isTerminal(current.status)) return terminalReceipt(current)
            yield* runtime.appendSteer(runId, message)
            yield* emit(host, runId, "control.steer.enqueued", {
              runId,
              messageId: message.messageId,
              kind: message.kind ?? "Message",
              createdAt: message.createdAt
            })
            // Only something awaited (an event park) or a swept launch is woken by a steer.
            const wakeable = (current.status === "parked" && current.waitingReason === "event") ||
              (current.status === "accepted" && current.ownerId === undefined)
            if (!wakeable) return accepted(key, runId)
            const drift = yield* runtime.codeDrift(runId)
            if (drift !== undefined) {
              yield* Effect.logWarning("steer queued but run not woken: code drift", { runId })
              return accepted(key, runId)
            }
            const resumed = yield* runtime.resume(runId, { scope: "launched" }).pipe(
              Effect.map(Option.some),
              Effect.catchTags({
                ClaimLost: () => Effect.succeed(Option.none()),
                RunNotFound: () => Effect.succeed(Option.none())
              })
            )
            if (Option.isSome(resumed)) {
              yield* emit(host, runId, "control.steer.woke", {
                runId,
                messageId: message.messageId,
                status: resumed.value.status
              })
              woke = true
            }
            return accepted(key, runId)
          }))
        if (woke && executor !== undefined) {
          yield* executor.resumeRun({ runId }).pipe(
            Effect.catchAllCause((cause) => Effect.logWarning("steer re-drive failed", { runId, cause }))
          )
        }
        return receipt
      })

    // ---- signal -------------------------------------------------------------
    const signal: Service["signal"] = (raw) =>
      Effect.gen(function*() {
        const input = yield* admit("signal", Inputs.SignalInput, raw, [keyRule("signal")])
        const runId = input.runId
        const keys = yield* keyed(host, "signal", input, input.principal)
        // A signal's durable key is its command id.
        const { durableKey: commandId, key, principal } = keys
        const receipt = yield* mutate(host, {
          ...keys,
          lockKey: runId,
          replay: true,
          claimRunKey: true
        }, () =>
          Effect.gen(function*() {
            const current = yield* runtime.getRun(runId)
            if (Runs.isTerminal(current.status)) return terminalReceipt(current)
            yield* runtime.admitSignal(commandId, runId, input.signal, principal)
            yield* emit(host, runId, "control.signal.admitted", { commandId, runId, name: input.signal.name })
            return accepted(key, runId)
          }))
        if (receipt._tag === "Terminal" || receipt._tag === "Conflict") return receipt
        const command = yield* runtime.signalCommand(commandId)
        if (command === undefined || command.state === "delivered" || command.state === "terminal") return receipt
        const noMatch = new ControlError.NoMatchingWait({ runId, waitName: command.signal.name })
        if (command.state === "rejected") return yield* noMatch
        const answer = executor === undefined ? "unknown" as const : yield* executor.deliverSignal({
          commandId,
          token: command.token,
          runId,
          signal: command.signal,
          ...(command.principal !== undefined ? { principal: command.principal } : {})
        })
        switch (answer) {
          case "no-match":
            yield* runtime.settleSignal(commandId, "rejected")
            return yield* noMatch
          case "refused":
            yield* runtime.settleSignal(commandId, "rejected")
            return yield* new ControlError.Unauthorized({
              message: `caller may not answer wait ${command.signal.name} on run ${runId}`
            })
          case "delivered":
            yield* runtime.settleSignal(commandId, "delivered")
            return receipt
          case "unknown":
            return receipt
        }
      })

    // ---- cancel -------------------------------------------------------------
    const cancel: Service["cancel"] = (raw) =>
      Effect.gen(function*() {
        const input = yield* admit("cancel", Inputs.RunMutationInput, raw, [keyRule("cancel"), reasonRule("cancel")])
        const runId = input.runId
        const keys = yield* keyed(host, "cancel", input, input.principal)
        const { key, principal } = keys
        let interruptible = false
        const receipt = yield* mutate(host, {
          ...keys,
          lockKey: runId,
          // A cancel receipt is an answer about a run that changes: a repeat re-executes.
          replay: false,
          claimRunKey: false
        }, (prior) =>
          Effect.gen(function*() {
            interruptible = false
            const current = yield* runtime.getRun(runId)
            if (Runs.isTerminal(current.status)) return terminalReceipt(current)
            const record = yield* Runs.requestCancel(host, runId)
            if (typeof record === "object") {
              yield* Runs.reconcile(host, runId, record.status)
              return { _tag: "Terminal", runId, status: record.status } satisfies ControlSchema.Receipt
            }
            // One attribution per cancellation, not per ask.
            if (record !== "already-requested" && prior === undefined) {
              yield* emit(host, runId, "control.run.cancel-requested", {
                runId,
                source: "control",
                principal,
                ...(input.reason !== undefined ? { reason: input.reason } : {})
              })
            }
            interruptible = true
            return accepted(key, runId)
          }))
        if (!interruptible) return receipt
        const settled = yield* Runs.interruptAndSettle(host, runId)
        if (executor !== undefined) {
          yield* executor.settleCancelledPark({ runId }).pipe(
            Effect.catchAllCause((cause) => Effect.logWarning("settling a cancelled park failed", { runId, cause }))
          )
        }
        const final = yield* runtime.getRun(runId).pipe(Effect.orElseSucceed(() => settled))
        if (!Runs.isTerminal(final.status)) {
          const stored = yield* Runs.storeStatus(host, runId)
          if (stored === "completed" || stored === "failed" || stored === "cancelled") {
            yield* Runs.reconcile(host, runId, stored)
            return { _tag: "Terminal", runId, status: stored } satisfies ControlSchema.Receipt
          }
          return receipt
        }
        return terminalReceipt(final)
      })

    // ---- reads --------------------------------------------------------------
    const getRun: Service["getRun"] = (raw) =>
      admitId("getRun", "runId", raw).pipe(
        Effect.flatMap((runId) => runtime.getRun(runId)),
        Effect.flatMap(decorate),
        Effect.flatMap((summary) =>
          summary.status !== "completed" && summary.status !== "failed"
            ? Effect.succeed(summary)
            : Effect.map(runtime.runResult(summary.runId), (result): ControlSchema.RunSummary =>
              result === undefined
                ? summary
                : result._tag === "Failed"
                ? { ...summary, error: result.error as ControlSchema.Json }
                : result.value === undefined
                ? summary
                : { ...summary, result: result.value as ControlSchema.Json })
        )
      )

    // ---- start --------------------------------------------------------------
    const startRuns = (request: StartManyInput): Effect.Effect<ReadonlyArray<Started>, StartError> =>
      Effect.gen(function*() {
        const principal = yield* runtime.stampPrincipal(
          request.principal === undefined ? undefined : { id: request.principal.id, kind: request.principal.kind }
        )
        const many = request.inputs.length !== 1
        const now = yield* Clock.currentTimeMillis
        const started = yield* transact(
          host,
          "start",
          Effect.gen(function*() {
            const runs = yield* runtime.start({
              flowId: request.flowId,
              inputs: request.inputs,
              idempotencyKeys: request.idempotencyKeys,
              queue: request.queue ?? "default",
              priority: request.priority ?? 0,
              availableAtMs: request.availableAt ?? now,
              retry: request.retry,
              parentRunId: request.parentRunId,
              principal,
              // One run is handed at once to this process's executor when it drives runs (it offers `wake`);
              // a batch, or a run started by a client, waits for the claim of hosts with room.
              hand: executor?.wake !== undefined && !many
            })
            yield* emitFresh(
              host,
              "control.run.accepted",
              runs.filter((started) => started.created).map((started) => ({
                partition: started.run.runId,
                payload: {
                  runId: started.run.runId,
                  planId: started.plan.card.planId,
                  digest: started.plan.card.digest,
                  status: started.run.status,
                  start: true
                }
              }))
            )
            return runs
          }),
          `start:${globalThis.crypto.randomUUID()}`
        )
        for (const run of started) {
          // A refused hand-off settles the run failed; the start still answers it.
          if (run.handed) {
            yield* Runs.hand(host, run.plan, run.run, { executorRecordsRunning: executor?.recordsRunning === true }).pipe(
              Effect.catchTag("LaunchFailed", () => Effect.void)
            )
          }
        }
        if (executor?.wake !== undefined && started.some((run) => run.created && !run.handed)) yield* executor.wake
        return started.map((run) => ({ runId: run.run.runId, status: run.run.status, created: run.created }))
      })

    const start: Service["start"] = (input) =>
      Effect.map(
        startRuns({
          ...input,
          inputs: [input.input],
          ...(input.idempotencyKey === undefined ? {} : { idempotencyKeys: [input.idempotencyKey] })
        }),
        (runs) => runs[0]!
      )

    const startMany: Service["startMany"] = (input) => startRuns(input)

    const list: Service["list"] = (request) => listImpl(runtime, decorateAll, request)

    // The run store appends its ownership facts to the `Journal` of the caller's context; pin it to
    // this facade's journal so those facts join the facade's transactions whoever calls.
    const pinned = <A extends ReadonlyArray<unknown>, B, E2>(verb: (...args: A) => Effect.Effect<B, E2>) =>
    (...args: A): Effect.Effect<B, E2> => Effect.provideService(verb(...args), Journal.Journal, journal)

    return Control.of({
      plan: pinned(plan),
      run: pinned(run),
      approve: pinned(decide("approved")),
      deny: pinned(decide("denied")),
      steer: pinned(steer),
      signal: pinned(signal),
      cancel: pinned(cancel),
      resume: pinned(resume),
      getRun: pinned(getRun),
      list: pinned(list),
      start: pinned(start),
      startMany: pinned(startMany)
    })
  }
)

/**
 * Provides `Control` from `ControlRuntime` and `Journal` (reading
 * `ControlExecutor` and `RunStore` when present).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Control, never, ControlRuntime.ControlRuntime | Journal.Journal> = Layer.effect(
  Control,
  make
)
