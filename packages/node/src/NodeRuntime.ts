/**
 * NodeRuntime: one Layer over one SQLite file (or one PostgreSQL schema) that migrates every
 * package, builds journal, consensus, stores and control, and in host mode drives runs as
 * fibers with a heartbeat per owned run, sweeps for work, recovers after crashes and shuts
 * down gracefully.
 *
 * @since 0.1.0
 */
import type * as ApprovalAuthority from "@baton/control/ApprovalAuthority"
import type * as Control from "@baton/control/Control"
import type * as ControlError from "@baton/control/ControlError"
import type * as ControlExecutor from "@baton/control/ControlExecutor"
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import type * as Queues from "@baton/control/Queues"
import type * as DatabaseOpenError from "@baton/database/DatabaseOpenError"
import type * as DurableWriter from "@baton/database/DurableWriter"
import type * as Migrations from "@baton/database/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import type * as Consensus from "@baton/journal/Consensus"
import type * as Journal from "@baton/journal/Journal"
import type * as AttemptStore from "@baton/run-store/AttemptStore"
import type * as RunStore from "@baton/run-store/RunStore"
import * as PlatformRuntime from "@effect/platform-node/NodeRuntime"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Redacted } from "effect"
import { Duration, Effect, Layer } from "effect"
import type { HostEvent as Event } from "./internal/hostCore.js"
import type { NodeHostService } from "./internal/hostSupervisor.js"
import { NodeRuntimeError as RuntimeError } from "./internal/runtimeError.js"
import * as Composition from "./internal/runtimeLayer.js"
import type { Options as RuntimeOptions } from "./internal/runtimeOptions.js"

/**
 * NodeRuntime options. Defaults: `filename` `"./baton.db"`, `mode` `"host"`,
 * `maxRuns` 4 (1..1024), `queues` none (per-host limits since 0.2.0: `{ [queue]: { concurrency } }`, queue
 * names as `Queues.namePattern`, `concurrency` 1..1024; this host drives at most that many runs of the
 * queue at once, beside any global limit set with `Queues.setConcurrency`), `pollInterval` 1 s (100 ms..10 s), `shutdownGrace` 10 s (≤ 60 s),
 * `drainTimeout` 5 s (< `shutdownGrace`), `takeOverHungOwnersAfter` never (≥ 60 s when given),
 * application `migrations` with `idOffset` ≥ 10 000 (a multiple of 1000), unique namespaces and offsets
 * and `"<1..999>_<name>"` keys, all checked before the database is opened or created.
 *
 * @since 0.1.0
 * @category models
 */
export type Options = RuntimeOptions

/**
 * PostgreSQL options: `url` (default Config `DATABASE_URL`), `schema` (default `"baton"`),
 * `maxConnections` (a positive safe integer), `clockSync` (re-anchor period of the database clock;
 * default 15 s, at least 1 s), and the session settings of `PgDatabase.layer`: `statementTimeout`
 * (default 15 s), `idleInTransactionTimeout` (default 10 s; the server ends a session idle inside a
 * transaction this long, releasing its locks when its host went silent) and `keepAliveInitialDelay`
 * (TCP keepalive, default 5 s). Bad values fail `invalid_options` naming the option before the pool opens.
 *
 * @since 0.1.0
 * @category models
 */
export interface PgOptions extends Omit<Options, "filename"> {
  readonly url?: string | Redacted.Redacted<string>
  readonly schema?: string
  readonly maxConnections?: number
  readonly clockSync?: Duration.DurationInput
  readonly statementTimeout?: Duration.DurationInput
  readonly idleInTransactionTimeout?: Duration.DurationInput
  readonly keepAliveInitialDelay?: Duration.DurationInput
}

/** The session options `PgDatabase.layer` checks; its refusal of one is NodeRuntime's `invalid_options`. */
const sessionOptions: ReadonlyArray<string> = ["statementTimeout", "idleInTransactionTimeout", "keepAliveInitialDelay"]

const asInvalidOptions = (error: DatabaseOpenError.DatabaseOpenError): BuildError =>
  error.reason === "invalid_url" && sessionOptions.includes(error.target)
    ? new RuntimeError({
      reason: "invalid_options",
      field: error.target,
      message: error.message.replace(/^PgDatabase option /, "")
    })
    : error

/**
 * What the runtime layer provides (`Queues` since 0.2.0).
 *
 * @since 0.1.0
 * @category models
 */
export type Provided =
  | Control.Control
  | ControlRuntime.ControlRuntime
  | ControlExecutor.ControlExecutor
  | Queues.Queues
  | RunStore.RunStore
  | AttemptStore.AttemptStore
  | Journal.Journal
  | Consensus.Consensus
  | SqlClient.SqlClient
  | DurableWriter.DurableWriter
  | NodeHost

/**
 * Why the runtime layer failed to build.
 *
 * @since 0.1.0
 * @category errors
 */
export type BuildError =
  | NodeRuntimeError
  | DatabaseOpenError.DatabaseOpenError
  | Migrations.MigrationError
  | DurableWriter.DatabaseError
  | Journal.JournalError
  | ControlError.PersistenceError

/**
 * An option or catalog NodeRuntime refuses: `invalid_options`, `duplicate_flow`,
 * `read_only_host`; `field` names the option.
 *
 * @since 0.1.0
 * @category errors
 */
export const NodeRuntimeError = RuntimeError

/**
 * @since 0.1.0
 * @category errors
 */
export type NodeRuntimeError = RuntimeError

/**
 * What the host reports: `claimed`, `released`, `lapsed`, `settled`, `skipped-drift`.
 *
 * @since 0.1.0
 * @category models
 */
export type HostEvent = Event

/**
 * The running host: its identity and mode, the runs it drives (`owned`), its `events`,
 * `sweepNow` (one sweep tick now), `wake` (since 0.2.0: one discovery pass for new work as soon as
 * possible, without waiting for the next tick; wakes coalesce, so at most one pass is pending; the host
 * also wakes itself whenever a drive ends; a no-op in client mode and after shutdown began) and
 * `shutdown` (the graceful shutdown steps; idempotent).
 *
 * @since 0.1.0
 * @category services
 */
export const NodeHost = Composition.NodeHost

/**
 * @since 0.1.0
 * @category services
 */
export type NodeHost = Composition.NodeHost

/**
 * The code identity of the step encoding: `"baton-node/steps-1"`.
 *
 * @since 0.1.0
 * @category constants
 */
export const engineVersion: string = Composition.engineVersion

/**
 * The default approval authority: authorizes every request (whoever can open the owner-only
 * database file could write it directly; principals are recorded for audit).
 *
 * @since 0.1.0
 * @category constants
 */
export const trustLocalFile: ApprovalAuthority.Service = Composition.trustLocalFile

/**
 * The runtime over one SQLite file (default `./baton.db`, created 0600 in WAL mode).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<Provided, BuildError> =>
  Composition.compose(
    options,
    SqliteDatabase.layer({
      filename: options.filename ?? "./baton.db",
      ...(options.readOnly === undefined ? {} : { readOnly: options.readOnly }),
      ...(options.writer === undefined ? {} : { writer: options.writer })
    }),
    undefined
  ) as Layer.Layer<Provided, BuildError>

/**
 * The runtime over one PostgreSQL schema, reading lease time from the database clock.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPg = (options: PgOptions = {}): Layer.Layer<Provided, BuildError> =>
  Composition.compose(
    options,
    PgDatabase.layer({
      ...(options.url === undefined ? {} : { url: options.url }),
      ...(options.schema === undefined ? {} : { schema: options.schema }),
      ...(options.readOnly === undefined ? {} : { readOnly: options.readOnly }),
      ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections }),
      ...(options.statementTimeout === undefined ? {} : { statementTimeout: options.statementTimeout }),
      ...(options.idleInTransactionTimeout === undefined
        ? {}
        : { idleInTransactionTimeout: options.idleInTransactionTimeout }),
      ...(options.keepAliveInitialDelay === undefined ? {} : { keepAliveInitialDelay: options.keepAliveInitialDelay }),
      ...(options.writer === undefined ? {} : { writer: options.writer })
    }).pipe(Layer.mapError(asInvalidOptions)),
    PgDatabase.layerClock({ resync: options.clockSync ?? Duration.seconds(15) })
  ) as Layer.Layer<Provided, BuildError>

/**
 * The runtime over a fresh in-memory SQLite database, on Effect's `Clock` (so `TestClock`
 * drives leases). `pid` overrides the process id of the host identity.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerTest = (options: Options & { readonly pid?: number } = {}): Layer.Layer<Provided, BuildError> =>
  Composition.compose(options, TestDatabase.layer, undefined) as Layer.Layer<Provided, BuildError>

/**
 * Serve until interrupted: the layer does the work (sweeps, drives, shutdown on interruption).
 *
 * @since 0.1.0
 * @category running
 */
export const serve: Effect.Effect<never, never, NodeHost> = Effect.flatMap(NodeHost, () => Effect.never)

/**
 * Run a host program as the process's main: the platform's `runMain` (the first SIGINT/SIGTERM
 * interrupts the program, so layers shut down gracefully; exit 0 after an interrupt, 1 after a
 * failure) plus a watchdog armed by that signal that exits 1 after `shutdownGrace` + 2 s. A
 * second signal gets Node's default action.
 *
 * @since 0.1.0
 * @category running
 */
export const runMain = <E>(
  program: Effect.Effect<void, E>,
  options?: { readonly shutdownGrace?: Duration.DurationInput }
): void => {
  const graceMs = Duration.toMillis(Duration.decode(options?.shutdownGrace ?? "10 seconds")) + 2000
  const arm = () => {
    setTimeout(() => process.exit(1), graceMs).unref()
  }
  process.once("SIGINT", arm)
  process.once("SIGTERM", arm)
  PlatformRuntime.runMain(program)
}

/**
 * The shape of the `NodeHost` service.
 *
 * @since 0.1.0
 * @category models
 */
export type { NodeHostService }
