/**
 * The incarnations of the NodeRuntime hosts running in this process. Each runtime mints its own, so
 * a same-pid owner whose nonce carries one of these is another runtime here (alive), not an earlier
 * process that had this pid.
 */
import { Effect, type Scope } from "effect"

const live = new Map<string, number>()

/** Count `incarnation` as running in this process for the lifetime of the scope. */
export const hold = (incarnation: string): Effect.Effect<void, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      live.set(incarnation, (live.get(incarnation) ?? 0) + 1)
    }),
    () =>
      Effect.sync(() => {
        const held = (live.get(incarnation) ?? 1) - 1
        if (held <= 0) live.delete(incarnation)
        else live.set(incarnation, held)
      })
  )

/** Whether `nonce` (`"<incarnation>.<…>"`) was minted by a runtime still running in this process. */
export const isLiveHere = (nonce: string): boolean => {
  const dot = nonce.indexOf(".")
  return dot > 0 && live.has(nonce.slice(0, dot))
}
