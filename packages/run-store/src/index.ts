/**
 * Fenced run persistence for Baton: every ownership move is one SQL compare-and-swap.
 *
 * @since 0.1.0
 */

/**
 * Fenced run rows: create, read, cancel, claim, own, heartbeat, transition, steal.
 *
 * @since 0.1.0
 */
export * as RunStore from "./RunStore.js"

/**
 * The execution-revision feed: runs that changed, never passing an open transaction's change.
 *
 * @since 0.1.0
 */
export * as RunChanges from "./RunChanges.js"

/**
 * Per-step attempts fenced on run ownership.
 *
 * @since 0.1.0
 */
export * as AttemptStore from "./AttemptStore.js"

/**
 * Liveness checks, probes and evidence.
 *
 * @since 0.1.0
 */
export * as Ownership from "./Ownership.js"

/**
 * Lease constants and the owner heartbeat loop `keepAlive`.
 *
 * @since 0.1.0
 */
export * as Heartbeat from "./Heartbeat.js"

/**
 * The run store's migration set (block 1000).
 *
 * @since 0.1.0
 */
export * as Migrations from "./Migrations.js"

/**
 * Outcome counters.
 *
 * @since 0.1.0
 */
export * as RunStoreMetrics from "./RunStoreMetrics.js"

/**
 * The Consensus strategy over the run row.
 *
 * @since 0.2.0
 */
export * as SqlConsensus from "./SqlConsensus.js"
