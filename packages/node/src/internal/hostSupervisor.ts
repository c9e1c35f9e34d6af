/** The host supervisor: poll fiber, `NodeHost` members, and graceful shutdown. */
import * as Queues from "@baton/control/Queues"
import * as Dialect from "@baton/database/Dialect"
import { Cause, Deferred, Duration, Effect, Fiber, Queue, Random, Schedule, Stream } from "effect"
import type { HostCore, HostEvent } from "./hostCore.js"
import { logFailure } from "./hostRaces.js"
import { discovery, makeMemory, tick } from "./hostSweep.js"

/** `NodeHost`'s shape. */
export interface NodeHostService {
  readonly identity: HostCore["identity"]
  readonly mode: "host" | "client"
  readonly owned: Effect.Effect<
    ReadonlyArray<{ readonly runId: string; readonly flowId: string; readonly drive: number; readonly sinceMs: number }>
  >
  readonly events: Stream.Stream<HostEvent>
  readonly sweepNow: Effect.Effect<void>
  /** Ask for a discovery pass now; wakes coalesce (one pending pass at a time). Never fails. */
  readonly wake: Effect.Effect<void>
  readonly shutdown: Effect.Effect<void>
}

const owned = (core: HostCore) =>
  Effect.sync(() =>
    Array.from(core.driven.values()).map((entry) => ({
      runId: entry.runId,
      flowId: entry.flowId,
      drive: entry.control.state?.run.drive ?? 0,
      sinceMs: entry.sinceMs
    }))
  )

/** The client-mode host: owns nothing, sweeps nothing. */
export const client = (core: HostCore): NodeHostService => ({
  identity: core.identity,
  mode: "client",
  owned: Effect.succeed([]),
  events: Stream.empty,
  sweepNow: Effect.void,
  wake: Effect.void,
  shutdown: Effect.void
})

interface Listening {
  readonly listen: (channel: string) => Stream.Stream<string, unknown>
}

/** Wakes on the work channel's notifications for this schema; reconnects every 5 s after a failure. */
const listen = (core: HostCore): Effect.Effect<void> => {
  const sql = core.sql as unknown as Partial<Listening>
  if (!Dialect.isPostgres(core.sql) || typeof sql.listen !== "function") return Effect.void
  const once = Effect.gen(function*() {
    const [row] = yield* core.sql<{ schema: string }>`SELECT current_schema() AS schema`
    const schema = row?.schema
    yield* sql.listen!(Queues.workChannel).pipe(
      Stream.filter((payload) => payload === schema),
      Stream.runForEach(() => (core.accepting ? core.wake : Effect.void))
    )
  })
  return once.pipe(
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.interrupt : logFailure("listen for work", "", cause, { warning: "work notifications lost; retrying" })
    ),
    Effect.repeat(Schedule.spaced("5 seconds")),
    Effect.asVoid
  )
}

/**
 * Start the host: the first sweep tick runs at once (startup recovery), then every
 * `pollIntervalMs` ±10 %. Between ticks a second fiber answers wakes (`core.wake`: a drive ended, a
 * run was started here) with a discovery pass; it shares the ticks' permit, so passes never overlap. The returned service's `shutdown` runs the shutdown steps (docs/node.md) once,
 * bounded by `shutdownGraceMs`; the caller registers it as the layer's finalizer.
 */
export const start = (
  core: HostCore,
  timing: { readonly pollIntervalMs: number; readonly drainTimeoutMs: number; readonly shutdownGraceMs: number }
) =>
  Effect.gen(function*() {
    const memory = makeMemory()
    const permit = yield* Effect.makeSemaphore(1)
    const sweep = permit.withPermits(1)(tick(core, memory))
    const firstSweep = yield* Deferred.make<void>()
    const loop = Effect.gen(function*() {
      yield* sweep
      yield* Deferred.succeed(firstSweep, undefined)
      while (true) {
        const jitter = yield* Random.nextRange(0.9, 1.1)
        yield* Effect.sleep(Duration.millis(Math.round(timing.pollIntervalMs * jitter)))
        yield* sweep
      }
    })
    const poller = yield* Effect.forkDaemon(loop)
    // Taking the wake before the pass lets a wake during the pass queue exactly one more.
    const prompt = Effect.gen(function*() {
      yield* Deferred.await(firstSweep)
      while (true) {
        yield* Queue.take(core.wakes)
        yield* permit.withPermits(1)(discovery(core)).pipe(
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause) ? Effect.interrupt : logFailure("wake: discovery", "", cause)
          )
        )
      }
    })
    const waker = yield* Effect.forkDaemon(prompt)
    // PostgreSQL: a start in another process notifies the work channel; listening turns that into a wake.
    const listener = yield* Effect.forkDaemon(listen(core))
    const done = yield* Deferred.make<void>()
    let started = false
    const drainThenInterrupt = Effect.gen(function*() {
      core.accepting = false
      yield* Fiber.interrupt(poller)
      yield* Fiber.interrupt(waker)
      yield* Fiber.interrupt(listener)
      core.draining = true
      // Finalizers run uninterruptibly; the waits must stay interruptible for their timeouts.
      const all = () =>
        Effect.interruptible(Effect.forEach(Array.from(core.driven.values()), (entry) => entry.done, { discard: true }))
      const drained = yield* all().pipe(Effect.timeout(Duration.millis(timing.drainTimeoutMs)), Effect.option)
      if (drained._tag === "None") {
        yield* core.interruptAll("shutdown")
        yield* all()
      }
      yield* core.journal.flush.pipe(Effect.ignore)
    })
    const shutdown = Effect.suspend(() => {
      if (started) return Deferred.await(done)
      started = true
      return Effect.interruptible(drainThenInterrupt).pipe(
        Effect.timeout(Duration.millis(timing.shutdownGraceMs)),
        Effect.catchAll(() =>
          Effect.logWarning("shutdown grace elapsed; runs not released will be taken over once stale")
        ),
        Effect.ensuring(Deferred.succeed(done, undefined)),
        Effect.uninterruptible
      )
    })
    const service: NodeHostService = {
      identity: core.identity,
      mode: "host",
      owned: owned(core),
      events: Stream.fromPubSub(core.events),
      sweepNow: Effect.suspend(() => (core.accepting ? sweep : Effect.void)),
      wake: Effect.suspend(() => (core.accepting ? core.wake : Effect.void)),
      shutdown
    }
    return { service, firstSweep: Deferred.await(firstSweep), shutdown }
  })
