import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { sqliteStack } from "./support/stack.js"
import { cancelSuite } from "./suites/cancel.js"

describe("cancellation and lineage (SQLite)", () => {
  cancelSuite(sqliteStack)

  it.effect("27: a stored status outside RunStatus is decode_failed", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      yield* store.create("r", "{}")
      yield* sql`PRAGMA ignore_check_constraints = ON`
      yield* sql`UPDATE flows_runs SET status = 'not-a-status' WHERE run_id = 'r'`
      yield* sql`PRAGMA ignore_check_constraints = OFF`
      expect((yield* Effect.flip(store.requestCancel("r", 1))).code).toBe("decode_failed")
    }).pipe(Effect.provide(sqliteStack())))
})
