/** The host supervisor: poll fiber, `NodeHost` members, and graceful shutdown (node.md 4.5, 4.6). */
import { Deferred, Duration, Effect, Fiber, Random, Stream } from "effect"
import type { HostCore, HostEvent } from "./hostCore.js"
import { makeMemory, tick } from "./hostSweep.js"

/** `NodeHost`'s shape (node.md 4.1). */
export interface NodeHostService {
  readonly identity: HostCore["identity"]
  readonly mode: "host" | "client"
  readonly owned: Effect.Effect<
    ReadonlyArray<{ readonly runId: string; readonly flowId: string; readonly drive: number; readonly sinceMs: number }>
  >
  readonly events: Stream.Stream<HostEvent>
  readonly sweepNow: Effect.Effect<void>
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
  shutdown: Effect.void
})

/**
 * Start the host: the first sweep tick runs at once (startup recovery), then every
 * `pollIntervalMs` ±10 %. The returned service's `shutdown` runs the steps of node.md 4.6 once,
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
    const done = yield* Deferred.make<void>()
    let started = false
    const drainThenInterrupt = Effect.gen(function*() {
      core.accepting = false
      yield* Fiber.interrupt(poller)
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
      shutdown
    }
    return { service, firstSweep: Deferred.await(firstSweep), shutdown }
  })
