import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestJournal from "@baton/journal/TestJournal"
import { emitBoth, secrets } from "./support/secrets.js"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"

describe("credential-shaped values never reach storage", () => {
  it.effect("SQLite: the database file bytes hold no secret", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(path.join(tmpdir(), "baton-secrets-"))
      yield* emitBoth.pipe(
        Effect.provide(TestJournal.layerOn(SqliteDatabase.layer({ filename: path.join(dir, "journal.db") }))),
        Effect.scoped
      )
      const bytes = Buffer.concat(readdirSync(dir).map((file) => readFileSync(path.join(dir, file))))
      expect(bytes.includes("flows_journal_events")).toBe(true)
      expect(bytes.includes("[REDACTED]")).toBe(true)
      expect(bytes.includes(`"budget":{"tokens":1000}`)).toBe(true)
      for (const secret of Object.values(secrets)) expect(bytes.includes(secret), secret).toBe(false)
    }))
})
