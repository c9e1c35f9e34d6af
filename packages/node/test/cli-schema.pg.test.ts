/**
 * [pg] A mutating verb on a PostgreSQL schema that does not exist: exit 5 saying the CLI never creates a
 * database or schema and how to get one (a host start); the schema is still missing afterwards.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { baton, configModule } from "./cli-support.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("node cli missing schema")

describe.skipIf(url === undefined)("mutating verbs on a missing PostgreSQL schema", () => {
  it.scopedLive("are refused (5) without creating it, with or without a catalog", () =>
    Effect.gen(function*() {
      const schema = yield* PgSchema.throwaway(url!)
      for (const extra of [[], ["--config", configModule]]) {
        for (const args of [["cancel", "run-1"], ["approve", "plan-1"], ["signal", "run-1", "go"]]) {
          const result = yield* Effect.promise(() => baton(...args, "--pg", url!, "--schema", schema, ...extra))
          expect(result.code, `${args.join(" ")} ${extra.join(" ")}: ${result.stderr}`).toBe(5)
          expect(result.stderr).toMatch(/^baton: no Baton schema at .*\(schema node_[0-9a-f]+\): the schema does not exist, and baton commands never create a database or schema$/m)
          expect(result.stderr).toContain("hint: a host start creates it")
          expect(result.stderr).not.toContain("read-only open")
        }
      }
      // Still missing: a read says so.
      const read = yield* Effect.promise(() => baton("runs", "--pg", url!, "--schema", schema))
      expect(read.code).toBe(5)
      expect(read.stderr).toContain(`schema "${schema}" does not exist`)
    }), 120_000)
})
