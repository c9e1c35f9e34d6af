/**
 * The executor seam: how the control plane hands accepted runs to whatever
 * drives them, asks it to deliver signals and re-drive parked runs, and learns
 * about cancel requests. Every executor call happens outside the facade's
 * write transactions (a driver's own writes would wait on the held writer).
 *
 * Also home of the wait-token vocabulary hosts and projections share, and of
 * `FiberHost`, a minimal real host that runs flow bodies as fibers.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"
import type * as ControlError from "./ControlError.js"
import type * as ControlSchema from "./ControlSchema.js"
import type * as ControlRuntime from "./ControlRuntime.js"
import * as FiberHostImpl from "./internal/executorFiberHost.js"
import { sha256 } from "./internal/canonical.js"
import * as Wait from "./internal/executorWait.js"

/**
 * What the durable half of a cancel recorded: a new request, an earlier one,
 * an unknown run, or the run's terminal status (nothing to cancel).
 *
 * @since 0.1.0
 * @category models
 */
export type CancelRecord =
  | "recorded"
  | "already-requested"
  | "unknown"
  | { readonly _tag: "Terminal"; readonly status: "completed" | "failed" | "cancelled" }

/**
 * A signal offered to the executor for delivery to an open wait.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeliverSignalInput {
  readonly commandId?: string | undefined
  readonly token?: string | null | undefined
  readonly runId: ControlSchema.RunId
  readonly signal: ControlSchema.SignalPayload
  readonly principal?: ControlSchema.Principal | undefined
}

/**
 * The executor port.
 *
 * - `launch`: take an accepted run; `"accepted"` = driving it now (the run
 *   stays owned), `"pending"` = declined for now (control releases the
 *   launch); fails `LaunchFailed` when the run cannot be started at all.
 * - `requestCancel` (optional): record a cancel request durably; without it
 *   control uses `RunStore.requestCancel`.
 * - `deliverSignal`: `"delivered"`, `"no-match"` (no open wait of that name),
 *   `"refused"` (the principal may not answer it) or `"unknown"` (another
 *   process hosts the run; the command stays pending for it).
 * - `resumeRun`: `"resuming"` when this executor re-drives the run, else `"unknown"`.
 * - `settleCancelledPark`: clean up after a cancelled park.
 * - `wake` (optional, since 0.2.0): released runs became available (a start committed); look for
 *   work now instead of at the next sweep. An executor that drives runs offers it: `Control.start`
 *   hands a run available now only to such an executor, and leaves it released for hosts otherwise.
 * - `recordsRunning` (optional, since 0.2.0): `true` when the executor's own first write of an
 *   accepted run sets its status `running`. A run `Control.start` hands to such an executor then
 *   costs no hand-off transaction (no `control.run.running` entry; the executor's entry says it
 *   drives the run). Launches of approved plans keep their hand-off transaction either way.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly launch: (input: {
    readonly plan: ControlRuntime.StoredPlan
    readonly run: ControlSchema.RunSummary
  }) => Effect.Effect<"accepted" | "pending", ControlError.LaunchFailed>
  readonly requestCancel?: (input: {
    readonly runId: ControlSchema.RunId
  }) => Effect.Effect<CancelRecord, ControlError.PersistenceError>
  readonly deliverSignal: (
    input: DeliverSignalInput
  ) => Effect.Effect<"delivered" | "no-match" | "refused" | "unknown", ControlError.PersistenceError>
  readonly resumeRun: (input: {
    readonly runId: ControlSchema.RunId
  }) => Effect.Effect<"resuming" | "unknown", ControlError.PersistenceError>
  readonly settleCancelledPark: (input: {
    readonly runId: ControlSchema.RunId
  }) => Effect.Effect<void, ControlError.PersistenceError>
  readonly wake?: Effect.Effect<void> | undefined
  readonly recordsRunning?: boolean | undefined
}

/**
 * The executor read (optionally) by `Control.layer`.
 *
 * @since 0.1.0
 * @category services
 */
export class ControlExecutor extends Context.Tag("@baton/control/ControlExecutor")<ControlExecutor, Service>() {}

/**
 * Wraps an executor implementation (identity; a seam for later defaults).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (service: Service): Service => service

/**
 * Provides `ControlExecutor` from an implementation.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (service: Service): Layer.Layer<ControlExecutor> => Layer.succeed(ControlExecutor, make(service))

/**
 * An executor that drives nothing: `launch` answers `"pending"`,
 * `deliverSignal` and `resumeRun` answer `"unknown"`, `settleCancelledPark`
 * does nothing. `overrides` replace individual members.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeNoop = (overrides?: Partial<Service>): Service => ({
  launch: () => Effect.succeed("pending" as const),
  deliverSignal: () => Effect.succeed("unknown" as const),
  resumeRun: () => Effect.succeed("unknown" as const),
  settleCancelledPark: () => Effect.void,
  ...overrides
})

/**
 * Provides `makeNoop(overrides)`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNoop = (overrides?: Partial<Service>): Layer.Layer<ControlExecutor> =>
  Layer.succeed(ControlExecutor, makeNoop(overrides))

/**
 * The waiting reason of a human approval wait.
 *
 * @since 0.1.0
 * @category constants
 */
export const humanWaitReason = "approval" as const

/**
 * The token of the wait point `name` (optionally its `attempt`, a positive
 * integer) of `runId` in flow `flowId`: base64 of the UTF-8 JSON array
 * `[flowId, runId, "WaitFor/<name>[#<attempt>]"]`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const waitToken: (flowId: string, runId: string, name: string, attempt?: number) => string = Wait.waitToken

/**
 * The wait point a token names: `name` and, for a `#n` suffix with `n` a
 * positive safe integer, `attempt`. Any other suffix stays part of the name;
 * an undecodable token names nothing (`{}`) but still travels.
 *
 * @since 0.1.0
 * @category constructors
 */
export const waitPointOf: (token: string) => { readonly name?: string; readonly attempt?: number } = Wait.waitPointOf

/**
 * A waiting row as the projection reads it: `token` may be missing,
 * `request` is the parsed `waiting_request`, `createdAt` epoch milliseconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface WaitingRow {
  readonly runId: ControlSchema.RunId
  readonly flowId?: ControlSchema.FlowId | undefined
  readonly reason: string
  readonly token: string | null | undefined
  readonly request?: ControlSchema.Json | undefined
  readonly createdAt: number
}

/**
 * The `PendingWait` a waiting row stands for, or `undefined` when its reason
 * is neither `approval` nor `event` or it has no token. `tokenDigest` is the
 * sha256 of the token; `name`/`attempt` come from `waitPointOf`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const pendingWaitOf = (row: WaitingRow): Effect.Effect<ControlSchema.PendingWait | undefined> => {
  const token = row.token
  if ((row.reason !== "approval" && row.reason !== "event") || token === null || token === undefined || token === "") {
    return Effect.succeed(undefined)
  }
  return Effect.map(sha256(token), (tokenDigest) => {
    const point = waitPointOf(token)
    const wait: ControlSchema.PendingWait = {
      runId: row.runId,
      ...(row.flowId !== undefined ? { flowId: row.flowId } : {}),
      reason: row.reason,
      token,
      tokenDigest,
      ...(point.name !== undefined ? { name: point.name } : {}),
      ...(point.attempt !== undefined ? { attempt: point.attempt } : {}),
      ...(row.request !== undefined ? { request: row.request } : {}),
      createdAt: row.createdAt
    }
    return wait
  })
}

/**
 * The minimal real host: runs registered flow bodies as fibers in this
 * process, parks them on waits and approvals, re-drives them from the top on
 * resume and renews their leases with the run store's `Heartbeat.keepAlive`.
 *
 * @since 0.1.0
 * @category FiberHost
 */
export const FiberHost = {
  make: FiberHostImpl.make
}

/**
 * A flow body: re-driven from the top after every park, so it must be
 * replay-safe (waits and approvals answer from durable state on re-drive).
 *
 * @since 0.1.0
 * @category FiberHost
 */
export type RunBody = FiberHostImpl.RunBody

/**
 * What a body sees: its run, plan and input, and the operations that may park it.
 *
 * @since 0.1.0
 * @category FiberHost
 */
export type RunContext = FiberHostImpl.RunContext

/**
 * The failure that ends a body when it parked on a wait or an approval.
 *
 * @since 0.1.0
 * @category FiberHost
 */
export const Parked = FiberHostImpl.Parked

/**
 * @since 0.1.0
 * @category FiberHost
 */
export type Parked = FiberHostImpl.Parked

/**
 * Options of `FiberHost.make`: bodies by flow id and the poll period in
 * milliseconds (default 1,000; keep it well under `heartbeatStaleAfter`).
 *
 * @since 0.1.0
 * @category FiberHost
 */
export type FiberHostOptions = FiberHostImpl.Options
