/**
 * `@baton/control`: the authority layer over the run store — plans,
 * approvals, launch, signals, steering, cancel, resume and listing.
 *
 * Every module is also importable as `@baton/control/<Module>`. The Node-only
 * test layer lives at `@baton/control/TestControl` and is not re-exported here.
 *
 * @since 0.1.0
 */

/**
 * Approval authorities: who may decide which approvals.
 *
 * @since 0.1.0
 */
export * as ApprovalAuthority from "./ApprovalAuthority.js"

/**
 * Cancel attribution, including cascades.
 *
 * @since 0.1.0
 */
export * as Cancellation from "./Cancellation.js"

/**
 * The control facade.
 *
 * @since 0.1.0
 */
export * as Control from "./Control.js"

/**
 * The control plane's typed errors.
 *
 * @since 0.1.0
 */
export * as ControlError from "./ControlError.js"

/**
 * The executor seam, wait tokens and FiberHost.
 *
 * @since 0.1.0
 */
export * as ControlExecutor from "./ControlExecutor.js"

/**
 * Host presence: the live hosts and the flows they serve.
 *
 * @since 0.1.0
 */
export * as HostPresence from "./HostPresence.js"

/**
 * The low-level control port and its memory runtime (the SQL runtime over in-memory SQLite).
 *
 * @since 0.1.0
 */
export * as ControlRuntime from "./ControlRuntime.js"

/**
 * The control plane's schemas.
 *
 * @since 0.1.0
 */
export * as ControlSchema from "./ControlSchema.js"

/**
 * Run ancestry vocabulary.
 *
 * @since 0.1.0
 */
export * as Lineage from "./Lineage.js"

/**
 * Control's migration set (block 2000).
 *
 * @since 0.1.0
 */
export * as Migrations from "./Migrations.js"

/**
 * Queue control: pause, resume, global concurrency limits and per-queue stats.
 *
 * @since 0.2.0
 */
export * as Queues from "./Queues.js"

/**
 * `ControlRuntime` over SQL and the run store.
 *
 * @since 0.1.0
 */
export * as SqlControlRuntime from "./SqlControlRuntime.js"
