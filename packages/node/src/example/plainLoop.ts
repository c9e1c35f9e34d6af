/**
 * The plain loop `--compare` and the benchmark time the Baton run against: the same walk
 * and the same per-file hashing routine, sequential, one process, no database.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Glob } from "./glob.js"
import * as Hashing from "./hashing.js"
import * as Walk from "./walk.js"

/**
 * What the plain loop measured; `hashMs` covers the hashing phase only.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlainLoopResult {
  readonly files: number
  readonly bytes: number
  readonly hashMs: number
  readonly filesPerSecond: number
}

/**
 * Walks `root` and hashes every file in order.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (root: string, pattern?: Glob): Effect.Effect<PlainLoopResult, Walk.TooManyFiles> =>
  Effect.gen(function*() {
    const listing = yield* Walk.walk(root, { pattern })
    const start = yield* Clock.currentTimeMillis
    let bytes = 0
    for (const file of listing.files) {
      const result = yield* Hashing.hashFile(root, file)
      bytes += result.size
    }
    const hashMs = Math.max(1, (yield* Clock.currentTimeMillis) - start)
    return { files: listing.files.length, bytes, hashMs, filesPerSecond: (listing.files.length * 1000) / hashMs }
  })
