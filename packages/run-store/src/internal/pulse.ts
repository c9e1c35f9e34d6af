/**
 * The host's shared heartbeat: per run store, one fiber renews every lease its
 * `keepAlive` loops registered with one `heartbeatLeases` call per interval and
 * hands each loop its own run's answer, and one more fiber watches their
 * budgets, waking when the earliest one runs out instead of once per loop.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Consensus from "@baton/journal/Consensus"
import { Clock, Deferred, Duration, Effect, Either, Exit, FiberId, FiberSet, type Scope } from "effect"
import * as Admission from "./Admission.js"
import * as Boundary from "./Boundary.js"
import * as Errors from "./errors.js"
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

/** What a registered loop gives the pulse. Every callback is called synchronously. */
export interface Loop {
  /**
   * Every beat of the loop's lease, in the renewing fiber. Answers `undefined` when the beat
   * only updated the loop's state, or an effect the pulse runs next (a log, an interruption).
   */
  readonly onBeat: (beat: Beat) => Effect.Effect<void> | undefined
  /** Monotonic ms at which the loop's budget runs out (it only moves later, except by `rearm`). */
  readonly dueAtMs: () => number
  /**
   * The budget ran out: the loop starts its own expiry step and, if that step leaves the loop
   * running (a reconfirm confirmed), runs `rearm` so the pulse watches the new budget; if the
   * loop lapsed, it runs `lapsed`, which abandons a renewal in flight that carries its lease.
   */
  readonly onDue: (rearm: Effect.Effect<void>, lapsed: Effect.Effect<void>) => void
  /** The pulse closed: no more beats, and the loop watches its own budget from now on. */
  readonly onClosed: () => void
}

export interface Service {
  /** Registers `loop` for (`runId`, `owner`) on `store`'s pulse until the scope closes. */
  readonly register: (store: StoreService, lease: RunLease, loop: Loop) => Effect.Effect<void, never, Scope.Scope>
}

interface Registered {
  readonly loop: Loop
  /** Its expiry step is running: not due again until it rearms. */
  expiring: boolean
}

interface Member {
  readonly lease: RunLease
  /** Almost always one; an array, since a host delivers to every member each interval. */
  readonly loops: Array<Registered>
  /** Why the lease cannot be sent (refused at registration): its loops hear this every interval. */
  readonly refused: RunStoreError | undefined
  registered: boolean
  /** The group's last shared renewal its loops have heard (see `Group.renewed`). */
  seen: Beat | undefined
  /** Its loops whose expiry step is running: they hear every beat at once. */
  expiring: number
}

interface Group {
  readonly store: StoreService
  /** Members by lease (run and owner triple). */
  readonly members: Map<string, Member>
  /** The members sent and their leases, kept until the membership changes. */
  batch: {
    readonly members: ReadonlyArray<Member>
    /** The same members, for the lapse check of a renewal in flight. */
    readonly sent: ReadonlySet<Member>
    readonly leases: ReadonlyArray<RunLease>
    readonly refused: ReadonlyArray<Member>
  } | undefined
  /** The renewal in flight: the members it carries, and how to abandon it. */
  inflight: { readonly members: ReadonlySet<Member>; readonly abandon: Deferred.Deferred<void> } | undefined
  /**
   * The last interval that renewed every sent lease to its reading, and the members it carried,
   * while some of them have not heard it yet. Such an interval is not handed to each loop: a
   * loop hears it when the pulse next needs its state (a later beat that is not shared, the
   * budget watcher, a batch change, the pulse closing), so a host whose leases all renew does no
   * work per run each interval. A later shared renewal replaces an unheard one: the loop's state
   * after both is the state after the later (its stamp is higher, its reading later).
   */
  renewed: { readonly beat: Beat; readonly sent: ReadonlySet<Member> } | undefined
  /** Members with a loop in its expiry step: they hear every beat, shared or not. */
  readonly expiring: Set<Member>
  renewing: boolean
  watching: boolean
  /** When the watcher wakes next (monotonic ms), and how to wake it sooner. */
  wakeAtMs: number
  poke: Deferred.Deferred<void> | undefined
}

const keyOf = (runId: string, owner: OwnerIdType) => JSON.stringify([runId, owner.hostId, owner.pid, owner.nonce])

const nanosToMs = (nanos: bigint): number => Number(nanos / 1_000_000n)

/** The one answer when every lease was renewed to `readingMs`, else `undefined`. */
const renewedTo = (outcomes: ReadonlyArray<HeartbeatOutcome>, readingMs: number): HeartbeatOutcome | undefined => {
  for (let i = 0; i < outcomes.length; i++) {
    const outcome = outcomes[i]!
    if (outcome._tag !== "Updated" || outcome.heartbeatAtMs !== readingMs) return undefined
  }
  return outcomes[0]
}

/** What the loops of an abandoned renewal hear: the database did not take the beat in time. */
const abandoned = Errors.fromFailure("heartbeatLeases", new DurableWriter.DatabaseError({ code: "busy" }))

/** Abandon the group's renewal in flight when it carries `member`'s lease. */
const abandonFor = (group: Group, member: Member): Effect.Effect<void> =>
  Effect.sync(() => {
    const inflight = group.inflight
    if (inflight !== undefined && inflight.members.has(member)) Deferred.unsafeDone(inflight.abandon, Exit.void)
  })

const wake = (group: Group) => {
  if (group.poke !== undefined) Deferred.unsafeDone(group.poke, Exit.void)
}

/** Hands `member`'s loops `beat`, collecting the effects they answer into `pending`. */
const hear = (member: Member, beat: Beat, pending: Array<Effect.Effect<void>>) => {
  // A loop that ended while the call was in flight hears nothing more.
  if (!member.registered) return
  const loops = member.loops
  for (let k = 0; k < loops.length; k++) {
    const next = loops[k]!.loop.onBeat(beat)
    if (next !== undefined) pending.push(next)
  }
}

/** Hands `member` the group's shared renewal if it has not heard it yet. */
const catchUp = (group: Group, member: Member, pending: Array<Effect.Effect<void>>) => {
  const renewed = group.renewed
  if (renewed === undefined || member.seen === renewed.beat || !renewed.sent.has(member)) return
  member.seen = renewed.beat
  hear(member, renewed.beat, pending)
}

/** Hands every member the shared renewal it has not heard, and forgets it. */
const catchUpAll = (group: Group, pending: Array<Effect.Effect<void>>) => {
  const renewed = group.renewed
  if (renewed === undefined) return
  for (const member of renewed.sent) catchUp(group, member, pending)
  group.renewed = undefined
}

export const make: Effect.Effect<Service, never, Scope.Scope> = Effect.gen(function*() {
  const groups = new Map<StoreService, Group>()
  let closed = false
  // Runs after the fibers below are interrupted (finalizers run in reverse): every loop still
  // registered takes over its own budget, so closing the pulse can never keep work running.
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      closed = true
      for (const group of groups.values()) {
        // What the loops answer here (a warning) is dropped: the pulse is gone.
        catchUpAll(group, [])
        for (const member of group.members.values()) for (const r of member.loops) r.loop.onClosed()
      }
    })
  )
  // Scoped to the pulse: closing it interrupts every group's fibers.
  const fibers = yield* FiberSet.make()

  /**
   * One interval of a group: renew every registered lease in one call, then deliver. A group
   * with no member left ends its loop here, in the same synchronous step that marks it stopped,
   * so a registration never joins a loop that is about to end.
   */
  const tick = (group: Group) =>
    Effect.suspend(() => {
      if (group.members.size === 0) {
        group.renewing = false
        if (groups.get(group.store) === group) groups.delete(group.store)
        return Effect.succeed(false)
      }
      const pending: Array<Effect.Effect<void>> = []
      if (group.batch === undefined) {
        // The shared renewal not yet heard belongs to the old batch: its members hear it now.
        catchUpAll(group, pending)
        const all = [...group.members.values()]
        const sent = all.filter((member) => member.refused === undefined)
        group.batch = {
          members: sent,
          sent: new Set(sent),
          leases: Admission.trustedLeaseList(sent.map((m) => m.lease)),
          refused: all.filter((member) => member.refused !== undefined)
        }
      }
      const { leases, members, refused, sent } = group.batch
      return Effect.gen(function*() {
        const readingMs = Math.floor(yield* Clock.currentTimeMillis)
        const monotonicMs = nanosToMs(yield* Clock.currentTimeNanos)
        let answer: Either.Either<ReadonlyArray<HeartbeatOutcome>, RunStoreError> = Either.right([])
        if (members.length > 0) {
          // A renewal still retrying when a loop it carries lapses is abandoned (interrupted): left to
          // retry, it could commit once the database frees up and stamp the lease of an owner that
          // has stopped working. The others hear a failed beat and the next interval sends afresh.
          const abandon = Deferred.unsafeMake<void>(FiberId.none)
          group.inflight = { members: sent, abandon }
          answer = yield* Effect.raceFirst(
            Effect.either(group.store.heartbeatLeases(leases, readingMs)),
            Effect.as(Deferred.await(abandon), Either.left(abandoned))
          ).pipe(Effect.ensuring(Effect.sync(() => (group.inflight = undefined))))
        }
        const deliver = (member: Member, beat: Beat) => {
          catchUp(group, member, pending)
          hear(member, beat, pending)
        }
        const shared = Either.isRight(answer) && members.length > 0 ? renewedTo(answer.right, readingMs) : undefined
        if (shared !== undefined) {
          const beat: Beat = { readingMs, monotonicMs, answer: Either.right(shared) }
          // Loops in their expiry step read their state now: they hear it at once.
          for (const member of group.expiring) {
            if (!sent.has(member)) continue
            catchUp(group, member, pending)
            member.seen = beat
            hear(member, beat, pending)
          }
          group.renewed = { beat, sent }
        } else if (Either.isLeft(answer)) {
          const failed: Beat = { readingMs, monotonicMs, answer: Either.left(answer.left) }
          for (const member of members) deliver(member, failed)
        } else {
          // Renewed leases share one answer object, so they share one beat; runs of equal
          // answers (every lease renewed, chunk by chunk) skip the lookup.
          const beats = new Map<HeartbeatOutcome, Beat>()
          let last: HeartbeatOutcome | undefined
          let beat: Beat | undefined
          for (let i = 0; i < members.length; i++) {
            const outcome = answer.right[i]!
            if (outcome !== last) {
              last = outcome
              beat = beats.get(outcome)
              if (beat === undefined) {
                beat = { readingMs, monotonicMs, answer: Either.right(outcome) }
                beats.set(outcome, beat)
              }
            }
            deliver(members[i]!, beat!)
          }
        }
        // Every member heard the shared renewal before this interval's beat.
        if (shared === undefined) group.renewed = undefined
        for (const member of refused) deliver(member, { readingMs, monotonicMs, answer: Either.left(member.refused!) })
        if (pending.length > 0) yield* Effect.all(pending, { discard: true })
        return true
      }).pipe(
        // Each interval is its own trace: the loop was forked from whichever loop registered first.
        Effect.withSpan("Heartbeat.pulse", { root: true, attributes: { runs: members.length } })
      )
    })

  const renewing = (group: Group) =>
    tick(group).pipe(
      // A defect in one interval must not stop every run's heartbeat: log it and keep the loop.
      Effect.catchAllDefect((defect) => Effect.as(Effect.logError("heartbeat pulse interval failed", defect), true)),
      Effect.delay(Consensus.heartbeatInterval),
      Effect.repeat({ while: (more) => more })
    )

  const rearm = (group: Group, member: Member, r: Registered) =>
    Effect.sync(() => {
      if (!r.expiring) return
      r.expiring = false
      if (--member.expiring === 0) group.expiring.delete(member)
      wake(group)
    })

  /**
   * The budget watcher, its own fiber so a renewal that hangs never delays an expiry: it hands
   * every loop whose budget ran out to that loop's expiry step, then sleeps until the earliest
   * remaining budget runs out or a registration or rearm wakes it. Confirmed beats only move
   * budgets later, so with every lease renewing it wakes about once per budget (19 s), not once
   * per loop.
   */
  const watching = (group: Group) =>
    Effect.gen(function*() {
      while (true) {
        const now = nanosToMs(yield* Clock.currentTimeNanos)
        if (group.members.size === 0) {
          group.watching = false
          group.poke = undefined
          return
        }
        let next = Number.POSITIVE_INFINITY
        const heard: Array<Effect.Effect<void>> = []
        for (const member of group.members.values()) {
          catchUp(group, member, heard)
          for (const r of member.loops) {
            if (r.expiring) continue
            const due = r.loop.dueAtMs()
            if (due <= now) {
              r.expiring = true
              if (member.expiring++ === 0) group.expiring.add(member)
              r.loop.onDue(rearm(group, member, r), abandonFor(group, member))
            } else if (due < next) next = due
          }
        }
        group.renewed = undefined
        if (heard.length > 0) yield* Effect.all(heard, { discard: true })
        const poke = Deferred.unsafeMake<void>(FiberId.none)
        group.poke = poke
        group.wakeAtMs = next
        yield* Number.isFinite(next)
          ? Effect.raceFirst(Effect.sleep(Duration.millis(next - now)), Deferred.await(poke))
          : Deferred.await(poke)
      }
    })

  const register: Service["register"] = (store, lease, loop) =>
    Effect.acquireRelease(
      Effect.suspend(() => {
        const registered: Registered = { loop, expiring: false }
        if (closed) {
          loop.onClosed()
          return Effect.succeed(undefined)
        }
        let group = groups.get(store)
        if (group === undefined) {
          group = {
            store,
            members: new Map(),
            batch: undefined,
            inflight: undefined,
            renewed: undefined,
            expiring: new Set(),
            renewing: false,
            watching: false,
            wakeAtMs: Number.POSITIVE_INFINITY,
            poke: undefined
          }
          groups.set(store, group)
        }
        const key = keyOf(lease.runId, lease.owner)
        let member = group.members.get(key)
        if (member === undefined) {
          // Admitted once here, not at every interval; a lease the store would refuse is kept out
          // of the batch (it would fail every run's renewal) and its loops hear the refusal.
          const admitted = Admission.trustedLease(lease)
          member = Boundary.isRefusal(admitted)
            ? {
              lease,
              loops: [],
              refused: Errors.invalid("heartbeatLeases", admitted),
              registered: true,
              seen: undefined,
              expiring: 0
            }
            : { lease: admitted.value, loops: [], refused: undefined, registered: true, seen: undefined, expiring: 0 }
          group.members.set(key, member)
          group.batch = undefined
        }
        member.loops.push(registered)
        const starts: Array<Effect.Effect<unknown>> = []
        // Forked from the registering fiber, so they read the clock that fiber reads; made
        // interruptible, since a fork inherits this acquisition's uninterruptible region.
        if (!group.renewing) {
          group.renewing = true
          starts.push(FiberSet.run(fibers, Effect.interruptible(renewing(group))))
        }
        if (!group.watching) {
          group.watching = true
          starts.push(FiberSet.run(fibers, Effect.interruptible(watching(group))))
        } else if (loop.dueAtMs() < group.wakeAtMs) wake(group)
        return Effect.as(Effect.all(starts, { discard: true }), { group, key, member, registered })
      }),
      (handle) =>
        Effect.sync(() => {
          if (handle === undefined) return
          const { group, key, member, registered } = handle
          const at = member.loops.indexOf(registered)
          if (at !== -1) member.loops.splice(at, 1)
          if (registered.expiring) {
            registered.expiring = false
            if (--member.expiring === 0) group.expiring.delete(member)
          }
          if (member.loops.length > 0 || group.members.get(key) !== member) return
          member.registered = false
          group.members.delete(key)
          group.batch = undefined
        })
    ).pipe(Effect.asVoid)

  return { register }
})
