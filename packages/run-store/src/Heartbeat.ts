/**
 * The lease constants and `keepAlive`, the one owner heartbeat loop (docs/design/fencing-and-leases.md).
 *
 * @since 0.1.0
 */
import * as Consensus from "@baton/journal/Consensus"
import type * as OwnerIdModule from "@baton/journal/OwnerId"
import { Clock, Context, Deferred, Duration, Effect, Either, Fiber, Layer, Option, Runtime, type Scope } from "effect"
import * as Pulse_ from "./internal/pulse.js"
import { RunStore } from "./RunStore.js"

/**
 * Owner pulse period: 1 second.
 *
 * @since 0.1.0
 * @category constants
 */
export const heartbeatInterval: Duration.Duration = Consensus.heartbeatInterval

/**
 * A stamp is stale strictly after 30 seconds (exactly 30 s old is fresh).
 *
 * @since 0.1.0
 * @category constants
 */
export const heartbeatStaleAfter: Duration.Duration = Consensus.heartbeatStaleAfter

/**
 * How far a lease reading may lead the reference clock: 10 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const heartbeatSkewAllowance: Duration.Duration = Consensus.heartbeatSkewAllowance

/**
 * stale − skew − interval = 19 seconds: an owner stops working 19 s after its last
 * confirmed pulse.
 *
 * @since 0.1.0
 * @category constants
 */
export const heartbeatWriteTolerance: Duration.Duration = Consensus.heartbeatWriteTolerance

/**
 * `keepAlive` options: the stamp the claim stored (default: read with `RunStore.get`), and
 * hooks called with the unconfirmed time (ms) on a successful reconfirm and on lapse.
 *
 * @since 0.1.0
 * @category models
 */
export interface KeepAliveOptions {
  readonly heartbeatAtMs?: number
  readonly onReconfirm?: (unconfirmedMs: number) => Effect.Effect<void>
  readonly onLapse?: (unconfirmedMs: number) => Effect.Effect<void>
}

/**
 * How `keepAlive` ended on its own: `Lost` (the store answered `FenceLost`/`NotFound`) or
 * `Lapsed` (no confirmed beat for 19 s). Either way the work was told to stop.
 *
 * @since 0.1.0
 * @category models
 */
export type KeepAliveEnd =
  | { readonly _tag: "Lost"; readonly outcome: "FenceLost" | "NotFound" }
  | { readonly _tag: "Lapsed"; readonly unconfirmedMs: number }

const nanosToMs = (nanos: bigint): number => Number(nanos / 1_000_000n)

/**
 * The host's shared heartbeat. With a `Pulse` in its context, `keepAlive` does not beat on its
 * own: it registers its lease, and one fiber per run store renews every registered lease with one
 * `RunStore.heartbeatLeases` call per `heartbeatInterval` (one statement per 1,000 runs), handing
 * each loop its own run's answer, so a host owning N runs sends ⌈N / 1,000⌉ heartbeat statements
 * per second instead of N; a second fiber per store watches the loops' 19 s budgets, waking when
 * the earliest runs out (about once per budget while leases renew) and handing that loop to its
 * own expiry step. Each loop keeps its own rules (confirmation, the 19 s budget, the bounded
 * `reconfirm`, interruption on loss). Runs of different owners (each claim's own nonce) share
 * the statement. Build it with {@link makePulse} or {@link layerPulse}.
 *
 * @since 0.2.0
 * @category heartbeat
 */
export class Pulse extends Context.Tag("@baton/run-store/Heartbeat/Pulse")<Pulse, PulseService>() {}

/**
 * What a `Pulse` offers: `register(store, lease, loop)` renews `lease` on `store` until the
 * registration's scope closes, calling `loop.onBeat` with every renewal and `loop.onDue` when
 * `loop.dueAtMs()` (monotonic ms) has passed. `keepAlive` is its one caller.
 *
 * @since 0.2.0
 * @category models
 */
export interface PulseService extends Pulse_.Service {}

/**
 * One renewal as a registered loop sees it: the reading sent (`readingMs`, epoch ms), the
 * monotonic time it was taken (`monotonicMs`) and the store's answer for the lease.
 *
 * @since 0.2.0
 * @category models
 */
export interface Beat extends Pulse_.Beat {}

/**
 * A pulse whose fibers live in the current scope: closing the scope stops the renewals, and
 * every `keepAlive` loop still registered watches its own budget again (it lapses as if its
 * writes failed).
 *
 * @since 0.2.0
 * @category constructors
 */
export const makePulse: Effect.Effect<PulseService, never, Scope.Scope> = Pulse_.make

/**
 * {@link makePulse} as a layer: provide it where a host's `keepAlive` loops run.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerPulse: Layer.Layer<Pulse> = Layer.scoped(Pulse, makePulse)

/**
 * Renews `runId`'s lease for `owner` every `heartbeatInterval` while `work` runs. It never
 * ends on its own while the lease holds: the caller interrupts it after settling the work.
 * Only a beat that raises the stored stamp confirms; the 19 s budget runs on the monotonic
 * clock (`Clock.currentTimeNanos`), so a wall clock that stands still or jumps back never
 * extends it. On `FenceLost`/`NotFound` it interrupts `work` at once and ends `Lost`; when
 * the budget runs out and a bounded `reconfirm` does not confirm, it calls `onLapse`,
 * interrupts `work` and ends `Lapsed`. Interruption of `work` is requested, not awaited.
 * The budget stops the owner before a peer may take over as long as the owner's clock lag
 * plus a peer's clock lead stays within 11 s (30 s stale − 19 s budget): one machine's
 * processes share a clock, and on PostgreSQL `PgDatabase.layerClock` gives hosts the database's.
 * With a {@link Pulse} in the context the beats come from the host's shared pulse (one
 * statement for all its runs); without one, the loop beats alone with `RunStore.heartbeat`.
 *
 * @since 0.1.0
 * @category heartbeat
 */
export const keepAlive = (
  runId: string,
  owner: OwnerIdModule.OwnerId,
  work: Fiber.Fiber<unknown, unknown>,
  options: KeepAliveOptions = {}
): Effect.Effect<KeepAliveEnd, never, RunStore> =>
  Effect.gen(function*() {
    const store = yield* RunStore
    const shared = yield* Effect.serviceOption(Pulse)
    const toleranceMs = Duration.toMillis(heartbeatWriteTolerance)
    const reading = Effect.map(Clock.currentTimeMillis, Math.floor)
    const monotonic = Effect.map(Clock.currentTimeNanos, nanosToMs)
    const initial = options.heartbeatAtMs !== undefined
      ? options.heartbeatAtMs
      : yield* store.get(runId).pipe(
        Effect.map((row) => row.heartbeatAtMs ?? undefined),
        Effect.orElseSucceed(() => undefined)
      )
    const r0 = yield* reading
    const m0 = yield* monotonic
    let stored: number | undefined = initial
    let lastConfirmed = m0 - (stored === undefined ? 0 : Math.max(0, r0 - stored))
    let failing = false
    let behind = false
    const confirms = (h: number) => stored === undefined || h > stored
    const end = yield* Deferred.make<KeepAliveEnd>()
    const permit = yield* Effect.makeSemaphore(1)
    const annotate = Effect.annotateLogs({ runId })

    const finish = (result: KeepAliveEnd) =>
      Effect.zipRight(Fiber.interruptFork(work), Deferred.succeed(end, result))

    // Decides from one beat; answers an effect only when there is something to log or stop.
    const onBeat = (beat: Beat): Effect.Effect<void> | undefined => {
      const answer = beat.answer
      if (Either.isLeft(answer)) {
        if (failing) return undefined
        failing = true
        return Effect.logWarning("run heartbeat write failed").pipe(
          Effect.annotateLogs({ runId, code: answer.left.code })
        )
      }
      failing = false
      const outcome = answer.right
      if (outcome._tag !== "Updated") return finish({ _tag: "Lost", outcome: outcome._tag })
      if (confirms(outcome.heartbeatAtMs)) {
        stored = outcome.heartbeatAtMs
        lastConfirmed = Math.max(lastConfirmed, beat.monotonicMs)
        behind = false
        return undefined
      }
      if (behind) return undefined
      behind = true
      return Effect.logWarning(
        `run lease not extended: clock is ${(stored ?? beat.readingMs) - beat.readingMs} ms behind the stored stamp`
      ).pipe(annotate)
    }

    const pulse = Effect.gen(function*() {
      const readingMs = yield* reading
      const monotonicMs = yield* monotonic
      const answer = yield* Effect.either(store.heartbeat(runId, owner, readingMs))
      const next = onBeat({ readingMs, monotonicMs, answer })
      if (next !== undefined) yield* next
    })

    const expiry = permit.withPermits(1)(Effect.gen(function*() {
      const now = yield* monotonic
      if (lastConfirmed + toleranceMs - now > 0) return false
      const r = yield* reading
      const m = yield* monotonic
      const confirmed = yield* store.reconfirm(runId, owner, r).pipe(
        Effect.flatMap((outcome) =>
          outcome._tag === "Updated" && confirms(outcome.heartbeatAtMs)
            ? Effect.gen(function*() {
              const unconfirmedMs = m - lastConfirmed
              stored = outcome.heartbeatAtMs
              lastConfirmed = m
              if (options.onReconfirm) yield* options.onReconfirm(unconfirmedMs)
              return true
            })
            : Effect.succeed(false)
        ),
        // The 1 s reconfirm budget runs from the 19 s mark, not from when this step woke up
        // (a late timer must not push the interruption past 20 s after the last confirmed beat).
        // The timed-out reconfirm is interrupted before the owner is: left running, it could
        // commit later and extend a lease whose owner has stopped working.
        Effect.timeoutTo({
          duration: Duration.millis(Math.max(0, lastConfirmed + toleranceMs + Duration.toMillis(heartbeatInterval) - m)),
          onTimeout: () => false,
          onSuccess: (ok) => ok
        }),
        Effect.orElseSucceed(() => false)
      )
      if (confirmed) return false
      const unconfirmedMs = (yield* monotonic) - lastConfirmed
      yield* Effect.logWarning("run lease lapsed; interrupting owned work").pipe(
        Effect.annotateLogs({ runId, unconfirmedMs })
      )
      if (options.onLapse) yield* options.onLapse(unconfirmedMs)
      yield* finish({ _tag: "Lapsed", unconfirmedMs })
      return true
    }))

    // Sleeps until the budget would run out and looks again: a confirmed beat in between moved
    // the deadline, so the loop wakes about once per budget, not once per beat.
    const deadline = Effect.gen(function*() {
      while (true) {
        const remaining = lastConfirmed + toleranceMs - (yield* monotonic)
        if (remaining <= 0) {
          if (yield* expiry) return
        } else {
          yield* Effect.sleep(Duration.millis(remaining))
        }
      }
    })

    return yield* Effect.scoped(Effect.gen(function*() {
      if (Option.isNone(shared)) {
        const pulseFiber = yield* Effect.forkDaemon(Effect.forever(Effect.zipRight(Effect.sleep(heartbeatInterval), pulse)))
        const deadlineFiber = yield* Effect.forkDaemon(deadline)
        yield* Effect.addFinalizer(() => Effect.zipRight(Fiber.interruptFork(pulseFiber), Fiber.interruptFork(deadlineFiber)))
        return yield* Deferred.await(end)
      }
      // The pulse beats and watches the budget; the steps it hands back run in this loop's own
      // context (its clock, logger, callbacks) and stop with it.
      const runFork = Runtime.runFork(yield* Effect.runtime<never>())
      const steps = new Set<Fiber.RuntimeFiber<unknown>>()
      const start = (step: Effect.Effect<unknown>) => {
        const fiber = runFork(step)
        steps.add(fiber)
        fiber.addObserver(() => steps.delete(fiber))
      }
      yield* Effect.addFinalizer(() => Effect.forEach(steps, Fiber.interruptFork, { discard: true }))
      yield* shared.value.register(store, { runId, owner }, {
        onBeat,
        dueAtMs: () => lastConfirmed + toleranceMs,
        onDue: (rearm, lapsed) => start(Effect.flatMap(expiry, (stopped) => stopped ? lapsed : rearm)),
        onClosed: () => start(deadline)
      })
      return yield* Deferred.await(end)
    }))
  }).pipe(Effect.withSpan("Heartbeat.keepAlive"))
