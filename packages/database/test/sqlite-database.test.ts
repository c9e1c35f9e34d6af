/**
 * `SqliteDatabase`: the open sequence and its refusals (spec 9.1, 12), pragmas,
 * read-only opens (9.4), flags and driver recovery (checks 4, 15, 21, 23, 24).
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Effect, Exit, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { counterSet } from "./fixtures/counterSet.js"
import { removeTempDirs, snapshot, tempDir } from "./fixtures/files.js"
import { jsonBackstop } from "./fixtures/jsonBackstop.js"
import { runFixture } from "./support/processes.js"

afterAll(removeTempDirs)

const openError = (options: SqliteDatabase.SqliteDatabaseOptions) =>
  Layer.build(SqliteDatabase.layer(options)).pipe(Effect.scoped, Effect.flip)

const withDatabase = <A, E>(
  options: SqliteDatabase.SqliteDatabaseOptions,
  body: Effect.Effect<A, E, SqlClient.SqlClient | DurableWriter.DurableWriter>
) => Effect.provide(body, SqliteDatabase.layer(options))

/** A Baton database file (ledger + counter table), closed again. */
const migratedFile = (dir: string, name = "baton.db") =>
  Effect.gen(function*() {
    const filename = path.join(dir, name)
    yield* withDatabase({ filename }, Migrations.run([counterSet]))
    return filename
  })

const pragma = (name: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(`PRAGMA ${name}`)).pipe(
    Effect.map((rows) => Object.values(rows[0] ?? {})[0])
  )

describe("SqliteDatabase open", () => {
  it.live("creates missing parents 0700 and the file 0600 under umask 0, in WAL with foreign keys and busy timeout 0", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "a", "b", "c.db")
      const previous = process.umask(0)
      const settings = yield* withDatabase(
        { filename },
        Effect.all([pragma("journal_mode"), pragma("foreign_keys"), pragma("busy_timeout")])
      ).pipe(Effect.ensuring(Effect.sync(() => process.umask(previous))))
      expect(settings).toEqual(["wal", 1, 0])
      expect(fs.statSync(path.join(dir, "a")).mode & 0o777).toBe(0o700)
      expect(fs.statSync(path.join(dir, "a", "b")).mode & 0o777).toBe(0o700)
      expect(fs.statSync(filename).mode & 0o777).toBe(0o600)
    }))

  it.live("honours an explicit busyTimeout and mode; relative paths resolve against the working directory", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const cwd = process.cwd()
      process.chdir(dir)
      const timeout = yield* withDatabase(
        { filename: "rel.db", busyTimeout: "250 millis", mode: 0o640 },
        pragma("busy_timeout")
      ).pipe(Effect.ensuring(Effect.sync(() => process.chdir(cwd))))
      expect(timeout).toBe(250)
      expect(fs.statSync(path.join(dir, "rel.db")).mode & 0o777).toBe(0o640 & ~process.umask())
    }))

  it.live("reopens its own database and keeps the data", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = yield* migratedFile(dir)
      const value = yield* withDatabase(
        { filename },
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const writer = yield* DurableWriter.DurableWriter
          yield* writer.write(sql`UPDATE counter SET value = 7 WHERE id = 1`)
          return 7
        })
      )
      const read = yield* withDatabase(
        { filename },
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ value: number }>`SELECT value FROM counter`)
      )
      expect(read).toEqual([{ value }])
    }))

  it.live("isPostgres is false; isReadOnly is true only for a readOnly open (check 4)", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = yield* migratedFile(dir)
      const readWrite = yield* withDatabase(
        { filename },
        Effect.map(SqlClient.SqlClient, (sql) => [Dialect.isPostgres(sql), Dialect.isReadOnly(sql)])
      )
      const readOnly = yield* withDatabase(
        { filename, readOnly: true },
        Effect.map(SqlClient.SqlClient, (sql) => [Dialect.isPostgres(sql), Dialect.isReadOnly(sql)])
      )
      expect(readWrite).toEqual([false, false])
      expect(readOnly).toEqual([false, true])
    }))
})

describe("SqliteDatabase refusals (check 24)", () => {
  it.live("empty path and NUL bytes are invalid_path", () =>
    Effect.gen(function*() {
      for (const filename of ["", "a\u0000b.db"]) {
        const error = yield* openError({ filename })
        expect(error.reason).toBe("invalid_path")
        expect(error.message).toBe("SQLite database path is empty or contains a NUL byte")
      }
    }))

  it.live(":memory: and file: URIs are invalid_path", () =>
    Effect.gen(function*() {
      for (const filename of [":memory:", "file:x.db?mode=memory", "https://example.com/x.db"]) {
        const error = yield* openError({ filename })
        expect(error.reason).toBe("invalid_path")
        expect(error.message).toBe(
          `SqliteDatabase opens files by plain path; "${filename}" is not one (use TestDatabase.layer for an in-memory database)`
        )
      }
    }))

  it.live("a PostgreSQL URL is wrong_dialect, shown without its password", () =>
    Effect.gen(function*() {
      const error = yield* openError({ filename: "postgres://app:hunter2@db.example:5432/prod" })
      expect(error.reason).toBe("wrong_dialect")
      expect(error.message).toBe("postgres://app:***@db.example:5432/prod is a PostgreSQL URL; open it with PgDatabase.layer")
      expect(error.target).not.toContain("hunter2")
    }))

  it.live("a directory is not_a_file", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const error = yield* openError({ filename: dir })
      expect(error.reason).toBe("not_a_file")
      expect(error.message).toBe(`${dir} is a directory, not a database file`)
    }))

  it.live("a text file is not_a_database and stays byte-identical, without sidecars", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "notes.txt")
      fs.writeFileSync(filename, "these are my notes, not a database\n")
      const before = snapshot(dir)
      for (const readOnly of [false, true]) {
        const error = yield* openError({ filename, readOnly })
        expect(error.reason).toBe("not_a_database")
        expect(error.message).toBe(`${filename} is not a SQLite database`)
      }
      expect(snapshot(dir)).toEqual(before)
    }))

  it.live("a file with a SQLite header but garbage pages is not_a_database or corrupt, unchanged", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "broken.db")
      const bytes = Buffer.alloc(4096, 0xab)
      Buffer.from("SQLite format 3\u0000", "latin1").copy(bytes)
      fs.writeFileSync(filename, bytes)
      const before = snapshot(dir)
      const error = yield* openError({ filename })
      expect(["not_a_database", "corrupt"]).toContain(error.reason)
      expect(error.message.startsWith(filename)).toBe(true)
      expect(snapshot(dir)).toEqual(before)
    }))

  it.live("another application's SQLite database is foreign_database and stays byte-identical, without sidecars", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "app.db")
      const other = new Sqlite(filename)
      other.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'Ada')")
      other.close()
      const before = snapshot(dir)
      for (const readOnly of [false, true]) {
        const error = yield* openError({ filename, readOnly })
        expect(error.reason).toBe("foreign_database")
        expect(error.message).toBe(
          `${filename} already holds another application's tables (no flows_migrations ledger); choose a new file`
        )
      }
      expect(snapshot(dir)).toEqual(before)
      expect(Object.keys(before)).toEqual(["app.db"])
    }))

  it.live("a missing file opened read-only is not_found and nothing is created", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "sub", "missing.db")
      const error = yield* openError({ filename, readOnly: true })
      expect(error.reason).toBe("not_found")
      expect(error.message).toBe(`${filename} does not exist; a read-only open never creates a database`)
      expect(fs.readdirSync(dir)).toEqual([])
    }))

  it.live("createDirectory: false with a missing parent is not_found", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "nope", "x.db")
      const error = yield* openError({ filename, createDirectory: false })
      expect(error.reason).toBe("not_found")
      expect(error.message).toBe(`${filename} does not exist`)
      expect(fs.readdirSync(dir)).toEqual([])
    }))

  it.live("a parent that cannot be created is invalid_path naming the directory and errno", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      fs.writeFileSync(path.join(dir, "plain"), "x")
      const filename = path.join(dir, "plain", "sub", "x.db")
      const error = yield* openError({ filename })
      expect(error.reason).toBe("invalid_path")
      expect(error.message).toBe(`cannot create directory ${path.dirname(filename)} for database ${filename}: ENOTDIR`)
    }))

  // As root, permissions do not stop the process; the open runs as "nobody" instead, which
  // needs a checkout that others can reach (a root checkout in a private 0700 directory cannot).
  const root = process.getuid?.() === 0
  const asUnprivileged = root ? { uid: 65534, gid: 65534 } : {}
  const othersCanReach = (start: string): boolean => {
    for (let dir = path.resolve(start);; dir = path.dirname(dir)) {
      if ((fs.statSync(dir).mode & 0o001) === 0) return false
      if (path.dirname(dir) === dir) return true
    }
  }
  const checkout = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../..")
  const unprivilegedUnavailable = root && !othersCanReach(checkout)
  if (unprivilegedUnavailable) {
    console.log(`skipped: permission refusals need a user other than root, and ${checkout} is not reachable by "nobody"`)
  }
  const fixture = new URL("./fixtures/open-attempt.ts", import.meta.url)
  const attempt = (attempts: ReadonlyArray<SqliteDatabase.SqliteDatabaseOptions>) =>
    Effect.promise(() => runFixture(fixture, [JSON.stringify(attempts)], asUnprivileged)).pipe(
      Effect.map((result) =>
        JSON.parse(result.stdout.trim().split("\n").at(-1)!) as ReadonlyArray<{
          readonly ok: boolean
          readonly reason?: string
          readonly message?: string
        }>
      )
    )

  it.live.skipIf(unprivilegedUnavailable)("a read-only (0444) database opened read-write, or an unreadable (0000) one, is unreadable and unchanged", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = yield* migratedFile(dir)
      for (const sidecar of ["-wal", "-shm"]) fs.rmSync(filename + sidecar, { force: true })
      const hidden = path.join(dir, "hidden.db")
      fs.copyFileSync(filename, hidden)
      fs.chmodSync(filename, 0o444)
      fs.chmodSync(hidden, 0o000)
      const before = [fs.readFileSync(filename), fs.readFileSync(hidden)]
      const outcomes = yield* attempt([{ filename }, { filename: hidden, readOnly: true }, { filename, readOnly: true }])
      const denied = (file: string) => ({ ok: false, reason: "unreadable", message: `${file} cannot be opened: permission denied` })
      // Read-write on a read-only file and any open of an unreadable file are refused;
      // a read-only open of the read-only file is fine.
      expect(outcomes).toEqual([denied(filename), denied(hidden), { ok: true }])
      expect([fs.readFileSync(filename), fs.readFileSync(hidden)]).toEqual(before)
    }), 60_000)
})

describe("SqliteDatabase read-only open (spec 9.4)", () => {
  it.live("creates nothing, keeps a rollback-journal file unconverted, waits 1 s by default and refuses writes", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "legacy.db")
      // A Baton database in rollback-journal mode (as another tool might leave it).
      const seed = new Sqlite(filename)
      seed.exec(
        "CREATE TABLE flows_migrations (migration_id INTEGER PRIMARY KEY, namespace TEXT, name TEXT, applied_at_ms INTEGER);" +
          "CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL); INSERT INTO counter VALUES (1, 5)"
      )
      seed.close()
      const before = snapshot(dir)
      const outcome = yield* withDatabase(
        { filename, readOnly: true },
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const writer = yield* DurableWriter.DurableWriter
          let attempts = 0
          const failed = yield* writer.write(
            Effect.suspend(() => {
              attempts++
              return sql`UPDATE counter SET value = 6`
            })
          ).pipe(Effect.flip)
          const read = yield* writer.write(sql<{ value: number }>`SELECT value FROM counter`)
          return {
            code: failed.code,
            attempts,
            read,
            journal: yield* pragma("journal_mode"),
            busy: yield* pragma("busy_timeout")
          }
        })
      )
      expect(outcome).toEqual({ code: "read_only", attempts: 1, read: [{ value: 5 }], journal: "delete", busy: 1000 })
      expect(snapshot(dir)).toEqual(before)
    }))

  it.live("a ledger pass on a read-only client over an unmigrated file returns [] and creates no ledger (check 21)", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "empty.db")
      new Sqlite(filename).close()
      const applied = yield* withDatabase({ filename, readOnly: true }, Migrations.run([counterSet]))
      expect(applied).toEqual([])
      const check = new Sqlite(filename, { readonly: true })
      const tables = check.prepare("SELECT name FROM sqlite_master").all()
      check.close()
      expect(tables).toEqual([])
    }))
})

describe("SqliteDatabase migration refusals write nothing", () => {
  const v1: Migrations.MigrationSet = {
    namespace: "app",
    idOffset: 10_000,
    migrations: {
      "0001_items": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE items (id INTEGER PRIMARY KEY)`)
    }
  }
  const v2: Migrations.MigrationSet = {
    ...v1,
    migrations: {
      ...v1.migrations,
      "0002_tags": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE tags (id INTEGER PRIMARY KEY)`)
    }
  }
  const renamed: Migrations.MigrationSet = {
    ...v1,
    migrations: { "0001_things": v1.migrations["0001_items"]!, "0002_tags": v2.migrations["0002_tags"]! }
  }
  const refused = (filename: string, sets: ReadonlyArray<Migrations.MigrationSet>, readOnly = false) =>
    withDatabase({ filename, readOnly }, Migrations.run(sets)).pipe(
      Effect.flip,
      Effect.filterOrDieMessage(
        (error): error is Migrations.MigrationError => error._tag === "@baton/database/MigrationError",
        "expected a MigrationError"
      )
    )

  it.live("a file whose ledger is ahead of this build, or whose history changed, is refused and left byte-identical", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "app.db")
      yield* withDatabase({ filename }, Migrations.run([v2]))
      const before = fs.readFileSync(filename)
      const ahead = yield* refused(filename, [v1])
      expect(ahead.reason).toBe("ahead")
      expect(ahead.message).toBe(
        "the database is ahead of this build: migration 10002 of app is recorded, but app declares migrations only up to 10001; upgrade app or open another database"
      )
      expect((yield* refused(filename, [v1], true)).reason).toBe("ahead")
      const mismatch = yield* refused(filename, [renamed])
      expect(mismatch.reason).toBe("history_mismatch")
      expect(mismatch.message).toBe("migration 10001 of app is recorded under another name than this build declares (app_things)")
      expect(fs.readFileSync(filename).equals(before)).toBe(true)
    }))

  it.live("a read-only client with a pending migration returns [] and applies nothing (check 21)", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = path.join(dir, "app.db")
      yield* withDatabase({ filename }, Migrations.run([v1]))
      expect(yield* withDatabase({ filename, readOnly: true }, Migrations.run([v2]))).toEqual([])
      const db = new Sqlite(filename, { readonly: true })
      const ids = db.prepare("SELECT migration_id FROM flows_migrations").pluck().all()
      const tags = db.prepare("SELECT name FROM sqlite_master WHERE name = 'tags'").all()
      db.close()
      expect(ids).toEqual([10001])
      expect(tags).toEqual([])
    }))
})

describe("SqliteDatabase driver recovery (check 15)", () => {
  it.live("with a peer holding the write lock and maxAttempts 1, a write fails typed busy (no rollback defect)", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = yield* migratedFile(dir)
      const peer = new Sqlite(filename)
      peer.exec("BEGIN IMMEDIATE")
      const exit = yield* Effect.provide(
        Effect.flatMap(DurableWriter.DurableWriter, (writer) =>
          Effect.flatMap(SqlClient.SqlClient, (sql) => writer.write(sql`UPDATE counter SET value = value + 1`))),
        SqliteDatabase.layer({ filename, writer: { maxAttempts: 1 } })
      ).pipe(Effect.exit, Effect.ensuring(Effect.sync(() => peer.exec("ROLLBACK") && peer.close())))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) {
        expect(exit.cause._tag).toBe("Fail")
        const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
        expect(error).toBeInstanceOf(DurableWriter.DatabaseError)
        expect((error as DurableWriter.DatabaseError).code).toBe("busy")
      }
    }))

  it.live("a COMMIT failing on a deferred foreign key fails constraint and the next write on the client succeeds", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const filename = yield* migratedFile(dir)
      const outcome = yield* withDatabase(
        { filename },
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const writer = yield* DurableWriter.DurableWriter
          yield* writer.write(Effect.all([
            sql`CREATE TABLE parent (id INTEGER PRIMARY KEY)`,
            sql`CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL
                REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`
          ]))
          const failed = yield* writer.write(sql`INSERT INTO child (id, parent_id) VALUES (1, 99)`).pipe(Effect.flip)
          yield* writer.write(sql`INSERT INTO parent (id) VALUES (1)`)
          const children = yield* sql`SELECT id FROM child`
          const parents = yield* sql`SELECT id FROM parent`
          return { code: failed.code, children, parents }
        })
      )
      expect(outcome).toEqual({ code: "constraint", children: [], parents: [{ id: 1 }] })
    }))
})

describe("JSON backstop on SQLite (check 35)", () => {
  it.live("a jsonValid CHECK stores \\u0000 and lone-surrogate escapes on SQLite (the raw-SQL difference of 5.5)", () =>
    Effect.gen(function*() {
      const filename = path.join(tempDir(), "json.db")
      const outcome = yield* withDatabase({ filename }, jsonBackstop)
      expect(outcome).toEqual({ outcomes: ["stored", "stored", "stored", "stored"], stored: [1, 2, 3, 4] })
    }))
})
