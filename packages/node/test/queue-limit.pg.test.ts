/**
 * A global queue limit across three host processes on one PostgreSQL schema (queue-limit-scenario.ts).
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { globalLimitAcrossProcesses } from "./queue-limit-scenario.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("node global queue limit")

describe.skipIf(url === undefined)("a global queue limit across processes (PostgreSQL)", () => {
  // Three host processes start (TypeScript through tsx) on a loaded CI machine in up to ~40 s; the work
  // itself is bounded by the scenario's own 40 s deadline.
  it.scopedLive("three hosts on one schema never run more than 2 of a queue limited to 2", () =>
    Effect.flatMap(PgSchema.throwaway(url!), (schema) => globalLimitAcrossProcesses({ url: url!, schema }, 2)), 120_000)
})
