/**
 * The open ladder (spec 9.1 step 4, check 26): an open waits for a peer holding a
 * rollback-journal file exclusively, and gives up with `locked` when it never lets go.
 */
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Effect, Fiber, Layer, Option } from "effect"
import * as path from "node:path"
import { removeTempDirs, tempDir } from "./fixtures/files.js"

afterAll(removeTempDirs)

/** A Baton database (ledger present) left in rollback-journal mode, plus a peer connection. */
const legacyFileWithPeer = () => {
  const filename = path.join(tempDir(), "legacy.db")
  const seed = new Sqlite(filename)
  seed.exec(
    "CREATE TABLE flows_migrations (migration_id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
  )
  seed.close()
  const peer = new Sqlite(filename)
  peer.exec("BEGIN EXCLUSIVE")
  return { filename, peer }
}

describe("SqliteDatabase open ladder (check 26)", () => {
  it.live("an open waits while a peer holds BEGIN EXCLUSIVE and succeeds after it releases", () =>
    Effect.gen(function*() {
      const { filename, peer } = legacyFileWithPeer()
      const opening = yield* Effect.provide(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ journal_mode: string }>`PRAGMA journal_mode`),
        SqliteDatabase.layer({ filename })
      ).pipe(Effect.fork)
      yield* Effect.sleep("150 millis")
      // Nothing can read this file while the peer holds it exclusively.
      expect(Option.isNone(yield* Fiber.poll(opening))).toBe(true)
      peer.exec("COMMIT")
      peer.close()
      expect(yield* Fiber.join(opening)).toEqual([{ journal_mode: "wal" }])
    }))

  it.live("a peer that never releases makes the open fail locked after the ladder's 40 attempts", () =>
    Effect.gen(function*() {
      const { filename, peer } = legacyFileWithPeer()
      const error = yield* Layer.build(SqliteDatabase.layer({ filename })).pipe(
        Effect.scoped,
        Effect.flip,
        Effect.ensuring(Effect.sync(() => {
          peer.exec("ROLLBACK")
          peer.close()
        }))
      )
      expect(error.reason).toBe("locked")
      expect(error.message).toBe(`${filename} is held by another process; gave up waiting after 40 attempts`)
    }), 60_000)
})
