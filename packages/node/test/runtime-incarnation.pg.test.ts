/**
 * Two `layerPg` hosts in one process over one PostgreSQL schema are two incarnations: the second
 * host's resume of a run the first drives is refused and the step body runs once.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { secondRuntimeDoesNotJoin } from "./runtime-incarnation-scenario.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("node runtime incarnations (layerPg)")

describe.skipIf(url === undefined)("runtime incarnations (PostgreSQL)", () => {
  it.scopedLive("a second runtime in this process gets ClaimLost resuming a run the first drives; the step body runs once", () =>
    Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      yield* secondRuntimeDoesNotJoin((flows) =>
        NodeRuntime.layerPg({ url: url!, schema, flows, pollInterval: "100 millis" })
      )
    }), 60_000)
})
