/**
 * A global queue limit across three host processes on one SQLite file (queue-limit-scenario.ts).
 */
import { describe, it } from "@effect/vitest"
import { globalLimitAcrossProcesses } from "./queue-limit-scenario.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"

describe("a global queue limit across processes (SQLite)", () => {
  // Three host processes start (TypeScript through tsx) on a loaded CI machine in up to ~40 s; the work
  // itself is bounded by the scenario's own 40 s deadline.
  it.scopedLive("three hosts on one file never run more than 2 of a queue limited to 2", () =>
    globalLimitAcrossProcesses({ filename: tempDb().filename }, 2), 120_000)
})
