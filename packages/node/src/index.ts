/**
 * `@baton/node`: NodeRuntime, host identity and liveness, flows and steps, the node executor,
 * the `baton` CLI.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Cli from "./Cli.js"
/** @since 0.1.0 */
export * as Flow from "./Flow.js"
/** @since 0.1.0 */
export * as HostIdentity from "./HostIdentity.js"
/** @since 0.1.0 */
export * as NodeExecutor from "./NodeExecutor.js"
/** @since 0.1.0 */
export * as NodeRuntime from "./NodeRuntime.js"
/** @since 0.1.0 */
export * as ProcessLiveness from "./ProcessLiveness.js"
/** @since 0.1.0 */
export * as Run from "./Run.js"
/** @since 0.1.0 */
export * as Step from "./Step.js"
