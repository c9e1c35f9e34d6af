/**
 * The SQL runtime's `now` option: every operation of the service runs with Effect's `Clock` reading
 * `now()` (epoch milliseconds), so the runtime's own stamps and the run store and journal writes it
 * makes read one time source. Sleeping is left to the caller's clock.
 */
import { Clock, Effect } from "effect"
import type { Service } from "../ControlRuntime.js"

const nanos = (now: () => number): bigint => BigInt(Math.round(now() * 1_000_000))

/** A clock reading `now`, sleeping on `outer`. */
const reading = (now: () => number, outer: Clock.Clock): Clock.Clock => ({
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: now,
  currentTimeMillis: Effect.sync(now),
  unsafeCurrentTimeNanos: () => nanos(now),
  currentTimeNanos: Effect.sync(() => nanos(now)),
  sleep: (duration) => outer.sleep(duration)
})

/** Run `effect` with `Clock` reading `now` (the caller's clock still sleeps). */
export const under = (now: () => number) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.clockWith((outer) => Effect.withClock(effect, reading(now, outer)))

/** The service with every operation (each effect, and the effect each function answers) run `under(now)`. */
export const serviceUnder = (service: Service, now: () => number): Service => {
  const run = under(now)
  const members = Object.entries(service).map(([name, member]: [string, unknown]) => {
    if (Effect.isEffect(member)) return [name, run(member)]
    // Every other member of the port is a function answering an effect.
    const operation = member as (...args: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown>
    return [name, (...args: ReadonlyArray<unknown>) => run(operation(...args))]
  })
  return Object.fromEntries(members) as unknown as Service
}
