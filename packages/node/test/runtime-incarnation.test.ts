/**
 * Two NodeRuntime hosts in one process over one SQLite file are two incarnations: the second
 * host's resume of a run the first drives is refused and the step body runs once.
 */
import { describe, it } from "@effect/vitest"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"
import { secondRuntimeDoesNotJoin } from "./runtime-incarnation-scenario.js"

describe("runtime incarnations (SQLite)", () => {
  it.scopedLive("a second runtime in this process gets ClaimLost resuming a run the first drives; the step body runs once", () => {
    const db = tempDb()
    return secondRuntimeDoesNotJoin((flows) =>
      NodeRuntime.layer({ filename: db.filename, flows, pollInterval: "100 millis" })
    )
  }, 60_000)
})
