import * as TestDatabase from "@baton/database/TestDatabase"
import * as TestJournal from "@baton/journal/TestJournal"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { emitBoth, secrets } from "./support/secrets.js"

const url = TestDatabase.postgresTestUrl("journal secrets")

describe.skipIf(url === undefined)("credential-shaped values never reach storage", () => {
  it.effect("PostgreSQL: the table text holds no secret", () =>
    Effect.gen(function*() {
      yield* emitBoth
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ t: string }>`SELECT e::text AS t FROM flows_journal_events e`
      expect(rows.length).toBe(2)
      const text = rows.map((row) => row.t).join("\n")
      expect(text).toContain("[REDACTED]")
      const stored = yield* sql<{ p: string }>`SELECT payload_json AS p FROM flows_journal_events ORDER BY seq`
      for (const row of stored) expect(row.p).toContain(`"budget":{"tokens":1000}`)
      for (const secret of Object.values(secrets)) expect(text.includes(secret), secret).toBe(false)
    }).pipe(Effect.provide(TestJournal.layerOn(TestDatabase.layerPostgres(url!)))), 30_000)
})
