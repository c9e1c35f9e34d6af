import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { Effect } from "effect"
import { runFixture } from "../../database/test/support/processes.js"
import { schemaSuite } from "./suites/schema.js"

const url = TestDatabase.postgresTestUrl("run-store schema")
const fixture = new URL("./fixtures/raw-delete.ts", import.meta.url)

describe.skipIf(url === undefined)("schema and revisions (PostgreSQL)", () =>
  schemaSuite(() => TestDatabase.layerPostgres(url!), (sql, runId) =>
    Effect.gen(function*() {
      const rows = yield* sql<{ s: string }>`SELECT current_schema() AS s`
      yield* Effect.promise(() => runFixture(fixture, ["pg", url!, rows[0]!.s, runId]))
    })))
