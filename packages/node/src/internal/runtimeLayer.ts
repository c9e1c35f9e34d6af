/** NodeRuntime's composition: database → clock → migrations → stores → control → host. */
import * as ApprovalAuthority from "@baton/control/ApprovalAuthority"
import * as Control from "@baton/control/Control"
import * as ControlError from "@baton/control/ControlError"
import * as ControlExecutor from "@baton/control/ControlExecutor"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Queues from "@baton/control/Queues"
import * as SqlControlRuntime from "@baton/control/SqlControlRuntime"
import type * as DatabaseError from "@baton/database/DurableWriter"
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as Journal from "@baton/journal/Journal"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import * as os from "node:os"
import * as Flow from "../Flow.js"
import * as HostIdentity from "../HostIdentity.js"
import * as NodeExecutor from "../NodeExecutor.js"
import * as ProcessLiveness from "../ProcessLiveness.js"
import * as HostCore from "./hostCore.js"
import * as HostPresence from "./hostPresence.js"
import * as Supervisor from "./hostSupervisor.js"
import * as LiveIncarnations from "./liveIncarnations.js"
import { librarySets, type Options, type PgExtras, validate, validateCatalog, type Validated } from "./runtimeOptions.js"

/** The step and attempt encoding this executor writes. */
export const engineVersion = "baton-node/steps-1"

/** The approval authority that trusts whoever can open the database file. */
export const trustLocalFile: ApprovalAuthority.Service = { authorize: () => Effect.void }

/** Internal tag of the host core, built after control's runtime and before its executor. */
export class Core extends Context.Tag("@baton/node/internal/HostCore")<Core, HostCore.HostCore>() {}

/** The `NodeHost` tag (re-exported by NodeRuntime). */
export class NodeHost extends Context.Tag("@baton/node/NodeHost")<NodeHost, Supervisor.NodeHostService>() {}

const defaultPrincipal = () => {
  let user: string | undefined
  try {
    user = os.userInfo().username
  } catch {
    user = undefined
  }
  return { id: user || process.env["USER"] || "unknown", kind: "operator" }
}

const catalogReader = (options: Options, validated: Validated) =>
  options.loadFlows === undefined
    ? () => Effect.succeed(validated.flows)
    : () =>
      Effect.suspend(options.loadFlows!).pipe(
        Effect.flatMap((flows) =>
          validateCatalog(flows, "loadFlows()").pipe(
            Effect.mapError((error) =>
              new ControlError.PersistenceError({ operation: "load the flow catalog", message: error.message })
            )
          )
        )
      )

const migrationsLayer = (validated: Validated, options: Options) => {
  const sets = [...librarySets, ...validated.migrations]
  return Layer.effectDiscard(
    validated.readOnly
      ? Effect.asVoid(Migrations.status(sets))
      : Effect.asVoid(Migrations.run(sets, options.writer === undefined ? {} : { retry: options.writer }))
  )
}

/**
 * Compose NodeRuntime over a database layer (and, on PostgreSQL, its clock layer).
 */
export const compose = <E1, E2>(
  options: Options & PgExtras & { readonly pid?: number },
  database: Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, E1>,
  clock: Layer.Layer<never, E2, SqlClient.SqlClient> | undefined
) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const validated = yield* validate(options)
    // Each runtime is its own owner: a second runtime in this process must neither join the first
    // one's fences nor drive its runs, so every build mints its own incarnation.
    const identity = yield* HostIdentity.detectWith({
      ...(options.hostId === undefined ? {} : { hostId: options.hostId }),
      ...(options.pid === undefined ? {} : { pid: options.pid }),
      freshIncarnation: true
    })
    // Released after the host's shutdown (finalizers run in reverse): until then peers in this
    // process judge its runs alive.
    yield* LiveIncarnations.hold(identity.incarnation)
    const probe = ProcessLiveness.makeWith({
      identity,
      ...(validated.takeOverHungOwnersAfterMs === undefined
        ? {}
        : { takeOverHungOwnersAfter: validated.takeOverHungOwnersAfterMs })
    })
    const check = options.liveness ?? probe.check
    const readFlows = catalogReader(options, validated)
    const mapped = () => Effect.map(readFlows(), (flows) => flows.map(Flow.toDurableFlow))
    const hasCatalog = options.loadFlows !== undefined || validated.flows.length > 0
    const controlOptions: SqlControlRuntime.Options = {
      owner: HostIdentity.ownerOf(identity),
      incarnation: identity.incarnation,
      mintNonce: HostIdentity.mintNonce(identity),
      isAlive: check,
      principal: options.principal ?? defaultPrincipal(),
      approvalAuthority: options.approvalAuthority ?? trustLocalFile,
      engineVersion,
      ...(options.loadFlows === undefined
        ? { flows: validated.flows.map(Flow.toDurableFlow) }
        : { loadFlows: mapped, currentFlows: mapped }),
      adoptFlow: (flowId: string) =>
        Effect.map(mapped(), (flows) => flows.find((flow) => flow.flowId === flowId)),
      ...(validated.mode === "client" && !hasCatalog ? { pinnedFlow: () => Effect.succeed(true) } : {})
    }
    const withClock = clock === undefined ? database : Layer.provideMerge(clock, database)
    const migrated = Layer.provideMerge(migrationsLayer(validated, options), withClock)
    const consensus = Layer.provideMerge(SqlConsensus.layer, migrated)
    const stores = Layer.provideMerge(
      Layer.mergeAll(SqlJournal.layerWith(options.journal ?? {}), RunStore.layerWith, AttemptStore.layer, Queues.layer),
      consensus
    )
    const runtime = Layer.provideMerge(SqlControlRuntime.layer(controlOptions), stores)
    const core = Layer.provideMerge(
      Layer.scoped(
        Core,
        Effect.gen(function*() {
          return yield* HostCore.make({
            identity,
            mode: validated.mode,
            maxRuns: validated.maxRuns,
            queueLimits: validated.queueLimits,
            flows: readFlows,
            liveness: probe,
            check,
            runtime: yield* ControlRuntime.ControlRuntime,
            runStore: yield* RunStore.RunStore,
            attempts: yield* AttemptStore.AttemptStore,
            journal: yield* Journal.Journal,
            sql: yield* SqlClient.SqlClient
          })
        })
      ),
      runtime
    )
    const executor = Layer.provideMerge(
      Layer.effect(
        ControlExecutor.ControlExecutor,
        Effect.map(Core, (c) => validated.mode === "host" ? NodeExecutor.host(c) : NodeExecutor.client(c.runtime))
      ),
      core
    )
    const control = Layer.provideMerge(Control.layer, executor)
    const host = Layer.provideMerge(
      Layer.scoped(
        NodeHost,
        Effect.gen(function*() {
          const c = yield* Core
          if (validated.mode === "client") return Supervisor.client(c)
          const started = yield* Supervisor.start(c, validated)
          yield* Effect.addFinalizer(() => started.shutdown)
          // Registered after shutdown, so closing removes the presence row before the drain.
          yield* HostPresence.maintain(c, readFlows)
          return started.service
        })
      ),
      control
    )
    return Layer.map(host, (context) => Context.omit(Core)(context))
  }))

export type { DatabaseError }
