/**
 * The retry policy of outermost writes and the lock-key rule (docs/design/lock-order.md), shared
 * by the writer and the ledger pass so both decide a replay the same way.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Classify from "./classify.js"
import * as Options from "./options.js"

/** @internal */
export interface Policy {
  readonly maxAttempts: number
  readonly baseDelayMs: number
  readonly maxDelayMs: number
}

/**
 * The policy of `options`, with the writer's defaults. Invalid options are a
 * programming error: this throws (a defect at the writer's construction) with a
 * message naming the option and the rule, rather than clamping them silently.
 *
 * @internal
 */
export const policyOf = (
  options: { readonly maxAttempts?: number; readonly baseDelayMs?: number; readonly maxDelayMs?: number } | undefined
): Policy => {
  const problem = Options.writerProblem(options)
  if (problem !== undefined) throw new Error(`DurableWriter options: ${problem.message}`)
  return {
    maxAttempts: options?.maxAttempts ?? 10,
    baseDelayMs: options?.baseDelayMs ?? 50,
    maxDelayMs: options?.maxDelayMs ?? 10_000
  }
}

/**
 * Delay before replay `replay` (1-based), in ms: `base × 2^(replay−1)` times a uniform
 * jitter in [0.8, 1.2] from Effect's `Random` (tests inject one), then capped.
 *
 * @internal
 */
export const delayOf = (policy: Policy, replay: number): Effect.Effect<number> =>
  Effect.map(
    Random.nextRange(0.8, 1.2),
    (jitter) => Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (replay - 1) * jitter)
  )

/**
 * Replay iff some failure or defect carries SQL provenance classified `busy` and none
 * carries a hard code; interruptions never replay.
 *
 * @internal
 */
export const isRetryableCause = (cause: Cause.Cause<unknown>): boolean => {
  if (Cause.isInterrupted(cause)) return false
  let busy = false
  for (const reason of [...Cause.failures(cause), ...Cause.defects(cause)]) {
    const code = Classify.codeOf(reason)
    if (code === undefined) continue
    if (Classify.hardCodes.has(code)) return false
    if (code === "busy") busy = true
  }
  return busy
}

/**
 * A lock key is 1..1024 UTF-16 code units without U+0000 or an unpaired surrogate.
 *
 * @internal
 */
export const isValidKey = (key: unknown): key is string =>
  typeof key === "string" && key.length > 0 && key.length <= 1024 && !key.includes("\u0000") &&
  !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(key)
