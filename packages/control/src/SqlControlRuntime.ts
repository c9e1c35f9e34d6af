/**
 * The durable control runtime over one `SqlClient`: the `control_*` tables, fenced ownership through
 * `@baton/run-store`, and read-only projections of `flows_runs` (docs/design/control.md).
 *
 * @since 0.1.0
 */
import * as Dialect from "@baton/database/Dialect"
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import * as ApprovalAuthority from "./ApprovalAuthority.js"
import { ClaimLost, PersistenceError, RunNotFound } from "./ControlError.js"
import type { Service } from "./ControlRuntime.js"
import type { RunSummary } from "./ControlSchema.js"
import { ControlRuntime } from "./ControlRuntime.js"
import { makeApprovals } from "./internal/sqlApprovals.js"
import type { SqlOptions } from "./internal/sqlContext.js"
import { makeContext } from "./internal/sqlContext.js"
import { makeListing } from "./internal/sqlListing.js"
import { makeClaimNext } from "./internal/sqlClaimNext.js"
import * as Clocked from "./internal/sqlClock.js"
import { makeOwnership } from "./internal/sqlOwnership.js"
import { makePlans } from "./internal/sqlPlans.js"
import { readProjected } from "./internal/sqlProjection.js"
import * as Batch from "./internal/sqlStartBatch.js"
import { makeStarts } from "./internal/sqlStarts.js"
import { makeSignals } from "./internal/sqlSignals.js"
import * as Migrations from "./Migrations.js"

/**
 * Options of the SQL runtime: flow catalog hooks, owner identity, incarnation and nonce minting, liveness
 * check, default principal, approval authority, engine version and `now`, a time source (epoch
 * milliseconds) every operation reads instead of Effect's `Clock`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends SqlOptions {}

/**
 * Apply control's migration set through the database ledger; a no-op on a read-only client.
 * Failures are `PersistenceError` (operation "migrate control tables").
 *
 * @since 0.1.0
 * @category migrations
 */
export const migrate: Effect.Effect<void, PersistenceError, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  if (Dialect.isReadOnly(sql)) return
  yield* Migrations.run.pipe(
    Effect.mapError((cause) => new PersistenceError({ operation: "migrate control tables", message: cause.message, cause }))
  )
})

/**
 * Build the runtime over a run store (migrates first). Options are snapshotted before the effect runs.
 * With `now`, the build and every operation of the service run with `Clock` reading it.
 * Fails `PersistenceError` (operation "configure the runtime") for an invalid `incarnation`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<Service, PersistenceError, SqlClient.SqlClient | DurableWriter.DurableWriter | RunStore.RunStore> => {
  const snapshot: Options = { ...options, ...(options.owner === undefined ? {} : { owner: Object.freeze({ ...options.owner }) }) }
  const built = Effect.gen(function*() {
    yield* migrate
    const store = yield* RunStore.RunStore
    const ctx = yield* makeContext(snapshot, store)
    const authority = snapshot.approvalAuthority ?? ApprovalAuthority.local
    const plans = makePlans(ctx)
    const approvals = makeApprovals(ctx, authority)
    const ownership = makeOwnership(ctx)
    const signals = makeSignals(ctx)
    const listing = makeListing(ctx)
    const getRun = (runId: string): Effect.Effect<RunSummary, RunNotFound | PersistenceError> =>
      Effect.flatMap(readProjected(ctx, runId), (projected): Effect.Effect<RunSummary, RunNotFound | PersistenceError> =>
        projected === undefined
          ? Effect.fail(new RunNotFound({ runId }))
          : projected.error === undefined
          ? Effect.succeed(projected.summary)
          : Effect.fail(projected.error))
    const starts = makeStarts(
      ctx,
      (planId) => plans.getPlan(planId).pipe(Effect.catchTag("PlanNotFound", () => Effect.succeed(undefined))),
      getRun
    )
    const service: Service = {
      authorizeApproval: (request) => authority.authorize(request),
      plan: plans.plan,
      getPlan: plans.getPlan,
      pagePlanIds: plans.pagePlanIds,
      queryPlans: plans.queryPlans,
      lookupApproval: approvals.lookupApproval,
      registerApproval: approvals.registerApproval,
      installBulkGrant: approvals.installBulkGrant,
      resolveApproval: approvals.resolveApproval,
      launch: plans.launch,
      start: starts.start,
      appendPrepared: Batch.appendPrepared(ctx),
      getRun,
      runResult: starts.runResult,
      queueing: starts.queueing,
      requeue: (runId, fence, attempt, availableAtMs) =>
        ctx.write(
          runId,
          "requeue a run",
          Effect.gen(function*() {
            const moved = yield* ctx.sql<{ run_id: string }>`UPDATE control_runs SET attempt = ${attempt + 1},
              available_at_ms = ${availableAtMs} WHERE run_id = ${runId} AND attempt = ${attempt} RETURNING run_id`
            if (moved.length === 0) return yield* Effect.fail(new ClaimLost({ runId, reason: "attempt moved on" }))
            return yield* ownership.releasePending(runId, fence)
          })
        ),
      pageRunIds: listing.pageRunIds,
      queryRuns: listing.queryRuns,
      hostCandidates: listing.hostCandidates,
      hostProbe: listing.hostProbe,
      claimNext: makeClaimNext(ctx, ownership.codeDrifts).claimNext,
      listFlows: plans.listFlows,
      deliverSignal: signals.deliverSignal,
      admitSignal: signals.admitSignal,
      signalCommand: signals.signalCommand,
      pendingSignals: signals.pendingSignals,
      signalCommands: signals.signalCommands,
      bindSignal: signals.bindSignal,
      settleSignal: signals.settleSignal,
      deliveredSignals: signals.deliveredSignals,
      appendSteer: signals.appendSteer,
      steers: signals.steers,
      requestResume: signals.requestResume,
      pendingResumes: signals.pendingResumes,
      clearResume: signals.clearResume,
      registerFiber: ownership.registerFiber,
      interrupt: ownership.interrupt,
      codeDrift: ownership.codeDrift,
      codeDrifts: ownership.codeDrifts,
      recordedCode: ownership.recordedCode,
      resume: ownership.resume,
      resumeAdopting: ownership.resumeAdopting,
      claimFence: ownership.claimFence,
      releasePending: ownership.releasePending,
      park: ownership.park,
      writeStatus: ownership.writeStatus,
      stampPrincipal: (submitted) =>
        Effect.map(ctx.now, (stampedAt) => ({
          id: submitted?.id ?? snapshot.principal?.id ?? "local",
          kind: submitted?.kind ?? snapshot.principal?.kind ?? "operator",
          stampedAt
        })),
      lookupMutation: signals.lookupMutation,
      recordMutation: signals.recordMutation,
      claimRunKey: signals.claimRunKey,
      releaseRunKey: signals.releaseRunKey,
      grants: approvals.grants
    }
    return snapshot.now === undefined ? service : Clocked.serviceUnder(service, snapshot.now)
  })
  return snapshot.now === undefined ? built : Clocked.under(snapshot.now)(built)
}

/**
 * The runtime as a layer over `SqlClient | DurableWriter | RunStore`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<ControlRuntime, PersistenceError, SqlClient.SqlClient | DurableWriter.DurableWriter | RunStore.RunStore> =>
  Layer.effect(ControlRuntime, make(options))

/**
 * `layer` with `RunStore.layer` provided.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithStore = (
  options: Options = {}
): Layer.Layer<ControlRuntime, PersistenceError, SqlClient.SqlClient | DurableWriter.DurableWriter> =>
  layer(options).pipe(Layer.provide(RunStore.layer))
