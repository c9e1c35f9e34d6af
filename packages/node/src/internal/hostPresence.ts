/**
 * A host's presence row: written at start, refreshed every 10 s while the host accepts runs, deleted when
 * it stops accepting (graceful shutdown). Readers such as `baton doctor` then see an idle host and the
 * code it runs for each flow, which the runs alone do not show.
 */
import type * as ControlError from "@baton/control/ControlError"
import * as HostPresence from "@baton/control/HostPresence"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Clock, Duration, Effect, Fiber } from "effect"
import * as Flow from "../Flow.js"
import type { HostCore } from "./hostCore.js"

/**
 * Far inside the stale cutoff (30 s) so a late refresh or two does not make a live host look gone, and
 * far above the sweep interval: an idle host writes one row every 10 s.
 */
export const refreshInterval = Duration.seconds(10)

/** How long shutdown waits for the row's deletion. */
const removeTimeout = Duration.seconds(2)

const served = (flows: ReadonlyArray<Flow.Any>): ReadonlyArray<HostPresence.ServedFlow> =>
  flows.map((flow) => ({ flowId: flow.id, version: Flow.codeIdentity(flow) }))

// Presence is advisory: a failed write never stops the host; it is logged by its code, not its values.
const logged = (what: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.asVoid,
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.interrupt
        : Effect.logWarning(`host presence: ${what} failed`).pipe(
          Effect.annotateLogs({ code: DurableWriter.codeOf(Cause.squash(cause)) ?? "unknown" })
        )
    )
  )

/**
 * Keep this host's row for the enclosing scope. `flows` is the catalog (re-read at each refresh, so a
 * loaded catalog's changes show; when it cannot be read the last flows are kept).
 */
export const maintain = (
  core: HostCore,
  flows: () => Effect.Effect<ReadonlyArray<Flow.Any>, ControlError.PersistenceError>
) =>
  Effect.gen(function*() {
    const context = yield* Effect.context<SqlClient.SqlClient | DurableWriter.DurableWriter>()
    const { hostId, incarnation, pid } = core.identity
    const startedAtMs = yield* Clock.currentTimeMillis
    let last: ReadonlyArray<HostPresence.ServedFlow> = []
    const record = (prune: boolean) =>
      Effect.gen(function*() {
        last = yield* flows().pipe(Effect.map(served), Effect.orElseSucceed(() => last))
        const seenAtMs = yield* Clock.currentTimeMillis
        yield* HostPresence.record({ hostId, pid, incarnation, flows: last, startedAtMs, seenAtMs }, { prune })
      }).pipe(Effect.provide(context))
    // Run in a fiber of its own: the closing fiber is interrupted (SIGTERM), and a write's interruptible
    // waits would give up at once there. Bounded, so a stuck database cannot hold the shutdown; a row left
    // behind goes stale.
    const remove = Effect.forkDaemon(HostPresence.remove(incarnation).pipe(Effect.provide(context))).pipe(
      Effect.flatMap(Fiber.join),
      Effect.timeoutFail({ duration: removeTimeout, onTimeout: () => new Cause.TimeoutException() }),
      logged("remove")
    )
    // At start, rows of hosts that stopped refreshing (killed) are pruned, so they do not pile up.
    yield* record(true).pipe(logged("record"))
    yield* Effect.addFinalizer(() => remove)
    // Forked after the finalizer: at scope close the refresher stops first, then the row is deleted.
    yield* Effect.forkScoped(Effect.gen(function*() {
      while (core.accepting) {
        yield* Effect.sleep(refreshInterval)
        if (core.accepting) yield* record(false).pipe(logged("refresh"))
      }
      // `shutdown` was called before the scope closes: the host takes no more runs, so it no longer serves.
      yield* remove
    }))
  })
