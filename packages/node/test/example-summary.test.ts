/**
 * The coordinator's summary measures hashing over the window it watched (node.md 7.3 step 6): after a
 * `--resume` of a run walked earlier, hashing time starts at the coordinator's start, never exceeding the
 * total.
 */
import { describe, expect, it } from "@effect/vitest"
import { hashingWindow } from "../src/internal/exampleProgress.js"

describe("coordinator hashing window", () => {
  it("a fresh run hashes from the end of its walk", () => {
    expect(hashingWindow({ startedAt: 1_000, walkDoneAt: 2_000, lastHashDoneAt: 9_000 })).toEqual({ fromMs: 2_000, ms: 7_000 })
  })

  it("a resumed run walked 40 s before this coordinator started hashes from the coordinator's start", () => {
    const startedAt = 100_000
    const window = hashingWindow({ startedAt, walkDoneAt: 60_000, lastHashDoneAt: 110_000 })
    expect(window).toEqual({ fromMs: startedAt, ms: 10_000 })
    // Never longer than the coordinator's own total (here 10.8 s).
    expect(window!.ms).toBeLessThanOrEqual(110_800 - startedAt)
  })

  it("no batch completed in the window, or no walk seen: no hashing phase", () => {
    expect(hashingWindow({ startedAt: 100_000, walkDoneAt: 60_000, lastHashDoneAt: 90_000 })).toBeUndefined()
    expect(hashingWindow({ startedAt: 1_000, walkDoneAt: undefined, lastHashDoneAt: 9_000 })).toBeUndefined()
    expect(hashingWindow({ startedAt: 1_000, walkDoneAt: 2_000, lastHashDoneAt: undefined })).toBeUndefined()
  })
})
