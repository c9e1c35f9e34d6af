import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { A, sqliteStack } from "./support/stack.js"
import { attemptsSuite } from "./suites/attempts.js"

describe("attempts (SQLite)", () => {
  attemptsSuite(sqliteStack)

  it.effect("35: corrupt JSON columns fail decode_failed", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const attempts = yield* AttemptStore.AttemptStore
      yield* sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, owner_host_id, owner_pid, owner_nonce,
        heartbeat_at_ms, state_json) VALUES (1, 'r', 'running', 0, ${A.hostId}, ${A.pid}, ${A.nonce}, 0, '{}')`
      yield* sql`PRAGMA ignore_check_constraints = ON`
      yield* sql`INSERT INTO flows_attempts (run_id, step_key_digest, attempt, state, started_at_ms, meta_json)
        VALUES ('r', 's', 0, 'running', 0, 'not-json')`
      yield* sql`PRAGMA ignore_check_constraints = OFF`
      const error = yield* Effect.flip(attempts.get({ runId: "r", stepKeyDigest: "s", attempt: 0 }))
      expect(error.code).toBe("decode_failed")
      expect((yield* Effect.flip(attempts.list("r"))).code).toBe("decode_failed")
    }).pipe(Effect.provide(sqliteStack())))
})
