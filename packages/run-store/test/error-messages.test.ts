/**
 * What a user sees when the database refuses a store write: the database
 * code (read-only, full, busy, …) in the message and in `cause` (§7).
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { A, migrated, pending } from "./support/stack.js"

/** A migrated SQLite file with one run, then reopened read-only under the production layers. */
const readOnlyStores = Layer.unwrapEffect(Effect.gen(function*() {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "run-store-ro-")), "runs.db")
  yield* Effect.flatMap(RunStore.RunStore, (store) =>
    Effect.zipRight(store.create("seed", "{}"), store.claimAndOwn("seed", pending, A, 0))).pipe(
    Effect.provide(Layer.provide(RunStore.layer, migrated(SqliteDatabase.layer({ filename: file }))))
  )
  const readOnly = SqliteDatabase.layer({ filename: file, readOnly: true })
  return Layer.provideMerge(Layer.merge(RunStore.layer, AttemptStore.layer), readOnly)
}))

describe("database codes reach the user", () => {
  it.effect("a write on a read-only database says read_only in the message and the cause", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const error = yield* Effect.flip(store.create("ro-1", "{}"))
      expect(error.code).toBe("persistence_failed")
      expect(error.method).toBe("create")
      expect(error.message).toBe("persistence_failed: RunStore.create: read_only: the database is open read-only")
      expect(error.cause).toEqual({ category: "read_only", cause: new DurableWriter.DatabaseError({ code: "read_only" }) })
      expect(DurableWriter.codeOf(error)).toBe("read_only")
      const attempts = yield* AttemptStore.AttemptStore
      const attempt = { runId: "seed", stepKeyDigest: "step", attempt: 0, state: "running", startedAtMs: 0, meta: {} }
      const attemptError = yield* Effect.flip(attempts.put(attempt, A))
      expect(attemptError.code).toBe("persistence_failed")
      expect(attemptError.message).toBe("persistence_failed: AttemptStore.put: read_only: the database is open read-only")
      expect(DurableWriter.codeOf(attemptError)).toBe("read_only")
      const sql = yield* SqlClient.SqlClient
      expect(yield* sql`SELECT run_id, status FROM flows_runs`).toEqual([{ run_id: "seed", status: "running" }])
      expect(yield* sql`SELECT run_id FROM flows_attempts`).toEqual([])
    }).pipe(Effect.provide(readOnlyStores)))
})
