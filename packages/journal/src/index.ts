/**
 * `@baton/journal`: the append-only per-run event history of Baton and the
 * `Consensus` ownership strategy the run store delegates to.
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 */
export * as Companion from "./Companion.js"
/**
 * @since 0.1.0
 */
export * as Consensus from "./Consensus.js"
/**
 * @since 0.1.0
 */
export * as Journal from "./Journal.js"
/**
 * @since 0.1.0
 */
export * as JournalEvent from "./JournalEvent.js"
/**
 * @since 0.1.0
 */
export * as Migrations from "./Migrations.js"
/**
 * @since 0.1.0
 */
export * as OwnerId from "./OwnerId.js"
/**
 * @since 0.1.0
 */
export * as Redaction from "./Redaction.js"
/**
 * @since 0.1.0
 */
export * as SqlJournal from "./SqlJournal.js"
