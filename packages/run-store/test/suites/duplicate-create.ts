/**
 * Duplicate `create` on both dialects: a `constraint` error that says a run
 * with this id already exists, and nothing written (§7, §10.1).
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { MakeStack } from "../support/stack.js"

export const duplicateCreateSuite = (makeStack: MakeStack) => {
  it.effect("a duplicate create is a constraint error naming the existing id; nothing changes", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      yield* store.create("dup-1", '{"first":true}')
      const before = yield* sql`SELECT * FROM flows_runs ORDER BY run_id`
      const changes = yield* sql`SELECT * FROM flows_run_changes ORDER BY run_id`
      const error = yield* Effect.flip(store.create("dup-1", '{"secret":"second"}'))
      expect(error.code).toBe("constraint")
      expect(error.method).toBe("create")
      expect(error.message).toBe("constraint: RunStore.create: a run with this id already exists")
      expect(error.message).not.toContain("secret")
      expect(error.cause).toEqual({
        runId: "dup-1",
        category: "constraint",
        cause: new DurableWriter.DatabaseError({ code: "constraint" })
      })
      expect(DurableWriter.codeOf(error)).toBe("constraint")
      expect(yield* sql`SELECT * FROM flows_runs ORDER BY run_id`).toEqual(before)
      expect(yield* sql`SELECT * FROM flows_run_changes ORDER BY run_id`).toEqual(changes)
      // Other refusals keep the database's own wording.
      const orphan = yield* Effect.flip(store.create("child", "{}", { parentRunId: "nope" }))
      expect(orphan.message).toBe(
        "constraint: RunStore.create: constraint: the database refused the row: a constraint or data check failed"
      )
    }).pipe(Effect.provide(makeStack())))
}
