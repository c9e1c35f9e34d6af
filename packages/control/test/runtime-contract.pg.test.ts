import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { runtimeContract } from "./fixtures/runtimeContract.js"
import { runtimeSignals } from "./fixtures/runtimeSignals.js"
import { pgShared, resetRuntime } from "./fixtures/runtimeSupport.js"
import { sqlRuntimeChecks } from "./fixtures/sqlRuntimeChecks.js"
import { storedRows } from "./fixtures/storedRows.js"

const url = TestDatabase.postgresTestUrl("control runtime contract")

/** A read-only pool on the suite's schema (sessions with `default_transaction_read_only`). */
const readOnlySchema = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ schema: string }>`SELECT current_schema() AS schema`
  return PgDatabase.layer({ url: url!, schema: row!.schema, readOnly: true })
})

// One schema for the suite; every test starts from emptied tables and a fresh runtime.
describe.skipIf(url === undefined)("PostgreSQL", () => {
  layer(pgShared(url!), { timeout: 120_000 })((it) => {
    runtimeContract("postgres", resetRuntime(), it)
    runtimeSignals("postgres", resetRuntime(), it)
    sqlRuntimeChecks("postgres", resetRuntime(), readOnlySchema, it)
    storedRows("postgres", resetRuntime(), it)
  })
})
