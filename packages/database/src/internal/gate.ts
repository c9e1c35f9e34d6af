/**
 * The writer's in-process gate (docs/design/lock-order.md). It mirrors the database locks so queued
 * writes wait in-process, interruptibly, before any connection is taken:
 * - exclusive: held alone (every SQLite write, PostgreSQL schema-wide writes);
 * - shared with a key: concurrent with other keys, one holder per key.
 * Waiters are served in arrival order, except that a keyed waiter blocked only by its
 * own key lets later waiters on other keys pass; nothing passes a waiting exclusive
 * request.
 *
 * @internal
 */
import * as Effect from "effect/Effect"

type Request = { readonly _tag: "Exclusive" } | { readonly _tag: "Keyed"; readonly key: string }

interface Waiter {
  readonly request: Request
  granted: boolean
  cancelled: boolean
  resume: (() => void) | undefined
}

/** @internal */
export interface Gate {
  /**
   * Run `effect` holding a permit for `request`. Call inside an uninterruptible
   * region: the wait runs under `restore` (the caller's own interruptibility), the
   * permit is released when `effect` ends.
   */
  readonly withPermit: (
    request: Request,
    restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  ) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** @internal */
export const exclusive: Request = { _tag: "Exclusive" }

/** @internal */
export const keyed = (key: string): Request => ({ _tag: "Keyed", key })

/** @internal */
export const make = (): Gate => {
  let exclusiveHeld = false
  let sharedHeld = 0
  const keysHeld = new Set<string>()
  const queue: Array<Waiter> = []

  const grant = (waiter: Waiter) => {
    waiter.granted = true
    if (waiter.request._tag === "Exclusive") exclusiveHeld = true
    else {
      sharedHeld++
      keysHeld.add(waiter.request.key)
    }
  }

  const pump = () => {
    const keysAhead = new Set<string>()
    for (let i = 0; i < queue.length;) {
      const waiter = queue[i]!
      const request = waiter.request
      if (request._tag === "Exclusive") {
        if (i === 0 && !exclusiveHeld && sharedHeld === 0) {
          queue.splice(i, 1)
          grant(waiter)
          waiter.resume?.()
          continue
        }
        return
      }
      if (!exclusiveHeld && !keysHeld.has(request.key) && !keysAhead.has(request.key)) {
        queue.splice(i, 1)
        grant(waiter)
        waiter.resume?.()
        continue
      }
      keysAhead.add(request.key)
      i++
    }
  }

  const release = (request: Request) => {
    if (request._tag === "Exclusive") exclusiveHeld = false
    else {
      sharedHeld--
      keysHeld.delete(request.key)
    }
    pump()
  }

  const cancel = (waiter: Waiter) => {
    if (waiter.cancelled) return
    waiter.cancelled = true
    const index = queue.indexOf(waiter)
    if (index >= 0) {
      queue.splice(index, 1)
      pump()
    } else if (waiter.granted) {
      // Granted in the same tick as the interruption: hand the permit back.
      release(waiter.request)
    }
  }

  const wait = (waiter: Waiter): Effect.Effect<void> =>
    Effect.async<void>((resume) => {
      waiter.resume = () => resume(Effect.void)
      queue.push(waiter)
      pump()
      if (waiter.granted) return
      return Effect.sync(() => cancel(waiter))
    })

  return {
    withPermit: (request, restore) => (effect) =>
      Effect.suspend(() => {
        const waiter: Waiter = { request, granted: false, cancelled: false, resume: undefined }
        return restore(wait(waiter)).pipe(
          Effect.onInterrupt(() => Effect.sync(() => cancel(waiter))),
          Effect.zipRight(Effect.ensuring(effect, Effect.sync(() => release(request))))
        )
      })
  }
}
