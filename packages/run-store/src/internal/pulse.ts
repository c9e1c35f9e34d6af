/**
 * The host's shared heartbeat: one fiber per store renews every lease its
 * `keepAlive` loops registered with one `heartbeatLeases` call per interval,
 * and hands each loop its own run's answer.
 */
import * as Consensus from "@baton/journal/Consensus"
import { Clock, Effect, Either, FiberSet, type Scope } from "effect"
import type { HeartbeatOutcome, OwnerIdType, RunLease, RunStoreError, Service as StoreService } from "./model.js"

/**
 * One renewal as a loop sees it: the lease reading sent (`readingMs`, epoch ms), the monotonic
 * time it was taken at (`monotonicMs`), and the store's answer for this lease.
 */
export interface Beat {
  readonly readingMs: number
  readonly monotonicMs: number
  readonly answer: Either.Either<HeartbeatOutcome, RunStoreError>
}

/**
 * Called with every beat of a registered lease, synchronously, in the pulse's fiber. It answers
 * `undefined` when the beat only updated its state, or an effect the pulse runs next (a log, an
 * interruption): the common path allocates no fiber and no effect.
 */
export type OnBeat = (beat: Beat) => Effect.Effect<void> | undefined

export interface Service {
  /** Registers `onBeat` for (`runId`, `owner`) on `store`'s pulse until the scope closes. */
  readonly register: (
    store: StoreService,
    lease: RunLease,
    onBeat: OnBeat
  ) => Effect.Effect<void, never, Scope.Scope>
}

interface Member {
  readonly lease: RunLease
  readonly handlers: Set<OnBeat>
}

interface Group {
  readonly store: StoreService
  /** Members by lease (run and owner triple). */
  readonly members: Map<string, Member>
  running: boolean
}

const keyOf = (runId: string, owner: OwnerIdType) => JSON.stringify([runId, owner.hostId, owner.pid, owner.nonce])

const nanosToMs = (nanos: bigint): number => Number(nanos / 1_000_000n)

export const make: Effect.Effect<Service, never, Scope.Scope> = Effect.gen(function*() {
  // Scoped to the pulse: closing it interrupts every group's loop.
  const fibers = yield* FiberSet.make()
  const groups = new Map<StoreService, Group>()

  /**
   * One interval of a group: renew every registered lease in one call, then deliver. A group
   * with no member left ends its loop here, in the same synchronous step that marks it stopped,
   * so a registration never joins a loop that is about to end.
   */
  const tick = (group: Group) =>
    Effect.suspend(() => {
      if (group.members.size === 0) {
        group.running = false
        if (groups.get(group.store) === group) groups.delete(group.store)
        return Effect.succeed(false)
      }
      const members = [...group.members.values()]
      return Effect.gen(function*() {
        const readingMs = Math.floor(yield* Clock.currentTimeMillis)
        const monotonicMs = nanosToMs(yield* Clock.currentTimeNanos)
        const answer = yield* Effect.either(group.store.heartbeatLeases(members.map((m) => m.lease), readingMs))
        const pending: Array<Effect.Effect<void>> = []
        const outcomes = Either.isRight(answer) ? answer.right : undefined
        const failed: Beat | undefined = Either.isLeft(answer)
          ? { readingMs, monotonicMs, answer: Either.left(answer.left) }
          : undefined
        for (let i = 0; i < members.length; i++) {
          const member = members[i]!
          // A loop that ended while the call was in flight hears nothing more.
          if (group.members.get(keyOf(member.lease.runId, member.lease.owner)) !== member) continue
          const beat = failed ?? { readingMs, monotonicMs, answer: Either.right(outcomes![i]!) }
          for (const onBeat of member.handlers) {
            const next = onBeat(beat)
            if (next !== undefined) pending.push(next)
          }
        }
        if (pending.length > 0) yield* Effect.all(pending, { discard: true })
        return true
      }).pipe(
        // Each interval is its own trace: the loop was forked from whichever loop registered first.
        Effect.withSpan("Heartbeat.pulse", { root: true, attributes: { runs: members.length } })
      )
    })

  const loop = (group: Group) =>
    tick(group).pipe(
      // A defect in one interval must not stop every run's heartbeat: log it and keep the loop.
      Effect.catchAllDefect((defect) => Effect.as(Effect.logError("heartbeat pulse interval failed", defect), true)),
      Effect.delay(Consensus.heartbeatInterval),
      Effect.repeat({ while: (more) => more })
    )

  const register: Service["register"] = (store, lease, onBeat) =>
    Effect.acquireRelease(
      Effect.suspend(() => {
        let group = groups.get(store)
        if (group === undefined) {
          group = { store, members: new Map(), running: false }
          groups.set(store, group)
        }
        const key = keyOf(lease.runId, lease.owner)
        const member = group.members.get(key) ?? { lease, handlers: new Set() }
        member.handlers.add(onBeat)
        group.members.set(key, member)
        if (group.running) return Effect.void
        group.running = true
        // Forked from the registering fiber, so the loop reads the clock that fiber reads; made
        // interruptible, since a fork inherits this acquisition's uninterruptible region.
        return Effect.asVoid(FiberSet.run(fibers, Effect.interruptible(loop(group))))
      }),
      () =>
        Effect.sync(() => {
          const group = groups.get(store)
          const key = keyOf(lease.runId, lease.owner)
          const member = group?.members.get(key)
          if (group === undefined || member === undefined) return
          member.handlers.delete(onBeat)
          if (member.handlers.size === 0) group.members.delete(key)
        })
    )

  return { register }
})
