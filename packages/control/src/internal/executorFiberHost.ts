/**
 * FiberHost: a minimal real executor running flow bodies as fibers of this
 * process. Bodies are re-driven from the top after every park.
 */
import * as Heartbeat from "@baton/run-store/Heartbeat"
import * as Ownership from "@baton/run-store/Ownership"
import * as RunStore from "@baton/run-store/RunStore"
import { Duration, Effect, Exit, Fiber, Schedule, Schema, Scope } from "effect"
import * as ControlError from "../ControlError.js"
import * as ControlRuntime from "../ControlRuntime.js"
import type * as ControlSchema from "../ControlSchema.js"
import type { Service } from "../ControlExecutor.js"
import { waitToken } from "./executorWait.js"

export class Parked extends Schema.TaggedError<Parked>()("Parked", {
  runId: Schema.String,
  reason: Schema.String,
  token: Schema.String
}) {}

export type RunBody = (ctx: RunContext) => Effect.Effect<ControlSchema.Json, unknown>

export interface RunContext {
  readonly runId: ControlSchema.RunId
  readonly run: ControlSchema.RunSummary
  readonly plan?: ControlRuntime.StoredPlan | undefined
  readonly input: unknown
  readonly waitFor: (
    name: string,
    options?: { readonly request?: ControlSchema.Json }
  ) => Effect.Effect<ControlSchema.Json, Parked | ControlError.ControlError>
  readonly approval: (
    target: Extract<ControlSchema.ApprovalTarget, { readonly _tag: "Node" }>,
    request?: ControlSchema.Json
  ) => Effect.Effect<
    ControlRuntime.ApprovalToken & { readonly _tag: "Approved" },
    Parked | ControlRuntime.ApprovalDenied | ControlError.ControlError
  >
  readonly steers: (
    after?: number
  ) => Effect.Effect<
    ReadonlyArray<{ readonly seq: number; readonly message: ControlSchema.SteerMessage }>,
    ControlError.ControlError
  >
}

export interface Options {
  readonly flows: Readonly<Record<string, RunBody>>
  readonly pollIntervalMs?: number
}

const terminal = (status: ControlSchema.RunStatus) =>
  status === "completed" || status === "failed" || status === "cancelled"

const staleAfterMs = Duration.toMillis(Heartbeat.heartbeatStaleAfter)

const messageOf = (cause: unknown): string =>
  typeof cause === "object" && cause !== null && "message" in cause && typeof cause.message === "string"
    ? cause.message
    : String(cause)

export const make = (
  options: Options
): Effect.Effect<Service, never, ControlRuntime.ControlRuntime | RunStore.RunStore | Scope.Scope> =>
  Effect.gen(function*() {
    const runtime = yield* ControlRuntime.ControlRuntime
    const store = yield* RunStore.RunStore
    const scope = yield* Scope.Scope
    // One heartbeat statement per interval for every run this host drives, not one per run.
    const pulse = yield* Heartbeat.makePulse
    const flows = new Map(Object.entries(options.flows))
    const pollIntervalMs = options.pollIntervalMs ?? 1000
    // Runs this host drives now (fence and body fiber) and runs it parked, so
    // a delegation or a signal for one of them is taken up here.
    const driven = new Map<string, { readonly fence: string; readonly fiber: Fiber.RuntimeFiber<unknown, unknown> }>()
    const parkedHere = new Set<string>()

    const park = (runId: string, fence: string, reason: string, token: string, request?: ControlSchema.Json) =>
      runtime.park(runId, fence, { reason, token, ...(request !== undefined ? { request } : {}) }).pipe(
        Effect.tap(() => Effect.sync(() => parkedHere.add(runId))),
        Effect.zipRight(Effect.fail(new Parked({ runId, reason, token })))
      )

    const contextOf = (
      runId: string,
      fence: string,
      run: ControlSchema.RunSummary,
      plan: ControlRuntime.StoredPlan | undefined
    ): RunContext => ({
      runId,
      run,
      plan,
      input: plan?.decodedInput,
      waitFor: (name, waitOptions) =>
        Effect.gen(function*() {
          const token = waitToken(run.flowId, runId, name, 1)
          const bound = yield* runtime.signalCommands({ runId, waitToken: token })
          const answer = bound.find((command) => command.state !== "rejected")
          if (answer !== undefined) {
            if (answer.state === "pending") yield* runtime.settleSignal(answer.commandId, "delivered")
            return answer.signal.payload
          }
          // A signal sent before the wait opened is still unbound: bind the oldest one.
          const early = yield* runtime.signalCommands({ runId, name, waitToken: null, state: "pending" })
          for (const command of early) {
            const got = yield* runtime.bindSignal(command.commandId, token)
            if (got === token) {
              yield* runtime.settleSignal(command.commandId, "delivered")
              return command.signal.payload
            }
          }
          return yield* park(runId, fence, "event", token, waitOptions?.request)
        }),
      approval: (target, request) =>
        Effect.gen(function*() {
          const token = yield* runtime.registerApproval(target)
          if (token._tag === "Pending") {
            return yield* park(runId, fence, "approval", waitToken(run.flowId, runId, target.requestId, 1), request)
          }
          if (token._tag === "Denied") {
            return yield* new ControlRuntime.ApprovalDenied({
              tokenId: token.tokenId,
              decisionPrincipal: token.decisionPrincipal,
              ...(token.reason !== undefined ? { reason: token.reason } : {})
            })
          }
          return token
        }),
      steers: (after) => runtime.steers(runId, after)
    })

    const settle = (
      runId: string,
      fence: string,
      exit: Exit.Exit<unknown, unknown>
    ): Effect.Effect<unknown, ControlRuntime.OwnershipError> => {
      if (Exit.isSuccess(exit)) return runtime.writeStatus(runId, fence, "completed")
      const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
      if (failure instanceof Parked) return Effect.void
      if (Exit.isInterrupted(exit)) return Effect.void
      return runtime.writeStatus(runId, fence, "failed")
    }

    const planOf = (run: ControlSchema.RunSummary): Effect.Effect<ControlRuntime.StoredPlan | undefined> =>
      run.planId === undefined
        ? Effect.succeed(undefined)
        : runtime.getPlan(run.planId).pipe(
          Effect.map((plan): ControlRuntime.StoredPlan | undefined => plan),
          Effect.orElseSucceed(() => undefined)
        )

    const drive = (runId: string) =>
      Effect.gen(function*() {
        const current = driven.get(runId)
        if (current !== undefined) return
        const fence = yield* runtime.claimFence(runId)
        const run = yield* runtime.getRun(runId)
        const body = flows.get(run.flowId)
        if (body === undefined) {
          return yield* new ControlError.LaunchFailed({ runId, message: `no body registered for flow ${run.flowId}` })
        }
        const plan = yield* planOf(run)
        parkedHere.delete(runId)
        const fiber = yield* Effect.forkIn(Effect.suspend(() => body(contextOf(runId, fence, run, plan))), scope)
        driven.set(runId, { fence, fiber })
        yield* runtime.registerFiber(runId, fiber)
        const owner = JSON.parse(fence) as Ownership.OwnerId
        const heartbeat = yield* Effect.forkIn(
          Heartbeat.keepAlive(runId, owner, fiber).pipe(
            Effect.provideService(RunStore.RunStore, store),
            Effect.provideService(Heartbeat.Pulse, pulse)
          ),
          scope
        )
        yield* Effect.forkIn(
          Effect.gen(function*() {
            const exit = yield* Fiber.await(fiber)
            yield* settle(runId, fence, exit).pipe(
              Effect.catchAll((error) =>
                error._tag === "ClaimLost"
                  ? Effect.void
                  : Effect.logWarning("FiberHost could not settle a run", { runId, error: messageOf(error) })
              )
            )
            const entry = driven.get(runId)
            if (entry?.fiber === fiber) driven.delete(runId)
            yield* Fiber.interrupt(heartbeat)
          }),
          scope
        )
      })

    const resumeRun: Service["resumeRun"] = ({ runId }) =>
      Effect.gen(function*() {
        if (driven.has(runId)) return "resuming" as const
        const run = yield* runtime.getRun(runId)
        if (!flows.has(run.flowId) || terminal(run.status)) return "unknown" as const
        const resumed = yield* runtime.resume(runId, { scope: "launched" })
        if (terminal(resumed.status)) return "unknown" as const
        yield* drive(runId)
        return "resuming" as const
      }).pipe(
        Effect.catchAll((error) =>
          error._tag === "PersistenceError" ? Effect.fail(error) : Effect.succeed("unknown" as const)
        )
      )

    const deliverSignal: Service["deliverSignal"] = (input) =>
      Effect.gen(function*() {
        const run = yield* runtime.getRun(input.runId)
        const wait = run.pendingWaits?.find((candidate) => candidate.name === input.signal.name)
        if (wait === undefined) {
          // A bound command is judged by the drive of its wait; and a run's summary takes more than one
          // statement, so a claim between them shows it parked with its waits cleared: only a second read
          // showing the same park without the wait is a no-match.
          if (input.token !== undefined && input.token !== null) return "unknown" as const
          if (run.status !== "parked" && run.status !== "waiting-approval") return "unknown" as const
          const again = yield* runtime.getRun(input.runId)
          const same = again.status === run.status && again.updatedAt === run.updatedAt &&
            !(again.pendingWaits ?? []).some((candidate) => candidate.name === input.signal.name)
          return same ? "no-match" as const : "unknown" as const
        }
        if (wait.reason === "approval") {
          const principal = input.principal ?? (yield* runtime.stampPrincipal())
          const allowed = yield* runtime.authorizeApproval({
            principal,
            target: {
              _tag: "Node",
              runId: wait.runId,
              requestId: input.signal.name,
              digest: wait.token,
              envelope: { capabilities: [], flows: [], budget: {} }
            },
            decision: "approved",
            scope: "once"
          }).pipe(Effect.as(true), Effect.catchTag("Unauthorized", () => Effect.succeed(false)))
          if (!allowed) return "refused" as const
        }
        if (input.commandId === undefined) return "unknown" as const
        const bound = yield* runtime.bindSignal(input.commandId, wait.token)
        if (bound !== wait.token) return "no-match" as const
        const seq = yield* runtime.requestResume(wait.runId)
        if (parkedHere.has(wait.runId)) {
          const answer = yield* resumeRun({ runId: wait.runId })
          if (answer === "resuming") yield* runtime.clearResume(wait.runId, seq)
        }
        return "delivered" as const
      }).pipe(
        Effect.catchAll((error) =>
          error._tag === "PersistenceError" ? Effect.fail(error) : Effect.succeed("no-match" as const)
        )
      )

    const poll = Effect.gen(function*() {
      for (const runId of [...driven.keys()]) {
        const row = yield* store.get(runId).pipe(Effect.option)
        if (row._tag === "Some" && row.value.cancelRequestedAtMs !== null) {
          yield* runtime.interrupt(runId).pipe(Effect.ignore)
        }
      }
      const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      for (const delegation of yield* runtime.pendingResumes) {
        const mine = parkedHere.has(delegation.runId)
        const stale = delegation.requestedAtMs < now - staleAfterMs
        if (!mine && !stale) continue
        const answer = yield* resumeRun({ runId: delegation.runId })
        if (answer === "resuming") yield* runtime.clearResume(delegation.runId, delegation.sequence)
      }
      for (const command of yield* runtime.pendingSignals) {
        const answer = yield* deliverSignal({
          commandId: command.commandId,
          token: command.token,
          runId: command.runId,
          signal: command.signal,
          principal: command.principal
        })
        if (answer === "delivered") yield* runtime.settleSignal(command.commandId, "delivered")
        else if (answer === "no-match" || answer === "refused") yield* runtime.settleSignal(command.commandId, "rejected")
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("FiberHost poll failed", cause)))

    yield* Effect.forkIn(Effect.repeat(poll, Schedule.spaced(Duration.millis(pollIntervalMs))), scope)

    const service: Service = {
      launch: ({ run }) =>
        Effect.gen(function*() {
          if (!flows.has(run.flowId)) {
            return yield* new ControlError.LaunchFailed({
              runId: run.runId,
              message: `no body registered for flow ${run.flowId}`
            })
          }
          yield* drive(run.runId).pipe(
            Effect.catchAll((error) =>
              error._tag === "LaunchFailed"
                ? Effect.fail(error)
                : Effect.fail(new ControlError.LaunchFailed({ runId: run.runId, message: messageOf(error), cause: error }))
            )
          )
          return "accepted" as const
        }),
      deliverSignal,
      resumeRun,
      settleCancelledPark: () => Effect.void
    }
    return service
  })
