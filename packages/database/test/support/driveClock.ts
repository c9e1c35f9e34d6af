/**
 * Test support: run an effect under `TestClock`, advancing the clock to each pending
 * sleep as soon as the effect is blocked on it, and record every slept delay (ms).
 */
import { Chunk, Effect, Exit, Fiber, Option, TestClock } from "effect"

export const driveClock = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<{ readonly exit: Exit.Exit<A, E>; readonly slept: ReadonlyArray<number> }, never, R> =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(effect)
    const slept: Array<number> = []
    for (let round = 0; round < 100_000; round++) {
      yield* Effect.yieldNow()
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) return { exit: done.value, slept }
      const sleeps = yield* TestClock.sleeps()
      if (Chunk.isEmpty(sleeps)) continue
      const now = yield* TestClock.currentTimeMillis
      const next = Math.min(...Chunk.toReadonlyArray(sleeps))
      slept.push(next - now)
      yield* TestClock.adjust(Math.max(0, next - now))
    }
    return yield* Effect.dieMessage("driveClock: the effect never finished")
  })

/** Unwrap a success or fail the test with the cause. */
export const successOf = <A, E>(exit: Exit.Exit<A, E>): A => {
  if (Exit.isSuccess(exit)) return exit.value
  throw new Error(`expected success, got ${String(exit.cause)}`)
}
