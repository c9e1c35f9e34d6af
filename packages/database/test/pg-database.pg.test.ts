/**
 * `PgDatabase` configuration, refusals, read-only clients, the JSON helper and the
 * throwaway test schema (checks 4, 29, 30, 35 on PostgreSQL).
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Deferred, Effect, Exit, Fiber, Layer, Redacted, Scope } from "effect"
import { counterSet } from "./fixtures/counterSet.js"
import { jsonBackstop } from "./fixtures/jsonBackstop.js"
import { rawQuery } from "./fixtures/pg.js"

const url = TestDatabase.postgresTestUrl("pg-database")

const openError = (options: PgDatabase.PgDatabaseOptions) =>
  Layer.build(PgDatabase.layer(options)).pipe(Effect.scoped, Effect.flip)

const currentSchema = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => Effect.map(sql<{ name: string }>`SELECT current_schema() AS name`, (rows) => rows[0]!.name)
)

/** Relations and functions in `schema`, to assert that an open created nothing. */
const objectsIn = (schema: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ name: string }>`
      SELECT c.relname AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = ${schema}
      UNION ALL
      SELECT p.proname FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = ${schema}
      ORDER BY 1`).pipe(Effect.map((rows) => rows.map((row) => row.name)))

const schemaExists = (schema: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql`SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = ${schema}`, (rows) => rows.length > 0))

describe.skipIf(url === undefined)("PgDatabase", () => {
  const pgUrl = url!
  const testLayer = () => TestDatabase.layerPostgres(pgUrl)

  it.live("isPostgres is true and isReadOnly only for readOnly clients (check 4)", () =>
    Effect.gen(function*() {
      const schema = yield* currentSchema
      const readWrite = yield* Effect.map(SqlClient.SqlClient, (sql) => [Dialect.isPostgres(sql), Dialect.isReadOnly(sql)])
      const readOnly = yield* Effect.provide(
        Effect.map(SqlClient.SqlClient, (sql) => [Dialect.isPostgres(sql), Dialect.isReadOnly(sql)]),
        PgDatabase.layer({ url: pgUrl, schema, readOnly: true })
      )
      expect(readWrite).toEqual([true, false])
      expect(readOnly).toEqual([true, true])
    }).pipe(Effect.provide(testLayer())))

  it.live("count(*) and BIGINT columns read as JS numbers; unsafe values fail only that query (check 29)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      yield* writer.write(sql`CREATE TABLE numbers (n BIGINT NOT NULL, d NUMERIC NOT NULL)`)
      yield* writer.write(sql`INSERT INTO numbers (n, d) VALUES (9007199254740991, 12), (-3, 0.5)`)
      const rows = yield* sql<{ n: unknown; d: unknown }>`SELECT n, d FROM numbers ORDER BY n`
      const count = yield* sql<{ count: unknown }>`SELECT count(*) AS count FROM numbers`
      expect(rows).toEqual([{ n: -3, d: 0.5 }, { n: 9007199254740991, d: 12 }])
      expect(count).toEqual([{ count: 2 }])
      const tooBig = yield* sql`SELECT 9007199254740993::bigint AS n`.pipe(Effect.exit)
      expect(Exit.isFailure(tooBig)).toBe(true)
      expect(yield* sql`SELECT 1::bigint AS n`).toEqual([{ n: 1 }])
    }).pipe(Effect.provide(testLayer())))

  it.effect("a migration that COMMITs the pass's transaction itself fails the pass there, naming it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const committing: Migrations.MigrationSet = {
        namespace: "committing",
        idOffset: 20_000,
        migrations: {
          "0001_early": Effect.flatMap(SqlClient.SqlClient, (s) => s.unsafe("CREATE TABLE early (x int); COMMIT")),
          "0002_after": Effect.flatMap(SqlClient.SqlClient, (s) => s.unsafe("CREATE TABLE after_commit (x int)"))
        }
      }
      const error = yield* Effect.flip(Migrations.run([committing]))
      expect(error).toBeInstanceOf(Migrations.MigrationError)
      expect(error).toMatchObject({ reason: "failed", migrationId: 20_001 })
      expect(error.message).toContain("migration 20001 (committing_early) ended the pass's transaction itself")
      const schema = yield* currentSchema
      const objects = yield* objectsIn(schema)
      // What the migration committed stays (that is why it is an error); nothing after it ran or was recorded.
      expect(objects).toContain("early")
      expect(objects).not.toContain("after_commit")
      expect(yield* sql`SELECT migration_id FROM flows_migrations`).toEqual([])
    }).pipe(Effect.provide(testLayer())))

  it.live("a read-only client creates nothing, reads while a writer holds the lock and fails writes read_only once (check 29)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      yield* Migrations.run([counterSet])
      const schema = yield* currentSchema
      const before = yield* objectsIn(schema)
      const holding = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* writer.write(Effect.zipRight(
        Effect.zipRight(sql`UPDATE counter SET value = 1`, Deferred.succeed(holding, undefined)),
        Deferred.await(release)
      )).pipe(Effect.fork)
      yield* Deferred.await(holding)
      const observed = yield* Effect.provide(
        Effect.gen(function*() {
          const reader = yield* SqlClient.SqlClient
          const readOnlyWriter = yield* DurableWriter.DurableWriter
          const bare = yield* reader<{ value: number }>`SELECT value FROM counter`
          const inTransaction = yield* readOnlyWriter.write(reader<{ value: number }>`SELECT value FROM counter`)
          let attempts = 0
          const failed = yield* readOnlyWriter.write(Effect.suspend(() => {
            attempts++
            return reader`UPDATE counter SET value = 99`
          })).pipe(Effect.flip)
          return { bare, inTransaction, code: failed.code, attempts }
        }),
        PgDatabase.layer({ url: pgUrl, schema, readOnly: true })
      )
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      expect(observed).toEqual({ bare: [{ value: 0 }], inTransaction: [{ value: 0 }], code: "read_only", attempts: 1 })
      expect(yield* objectsIn(schema)).toEqual(before)
      expect(yield* sql`SELECT value FROM counter`).toEqual([{ value: 1 }])
    }).pipe(Effect.provide(testLayer())))

  it.live("a read-only open of a missing schema is not_found and creates it not", () =>
    Effect.gen(function*() {
      const schema = `missing_${(yield* currentSchema).slice(5, 20)}`
      const error = yield* openError({ url: pgUrl, schema, readOnly: true })
      expect(error.reason).toBe("not_found")
      expect(error.message).toMatch(new RegExp(`^schema "${schema}" does not exist in postgres(ql)?://.*; a read-only open never creates it$`))
      expect(yield* schemaExists(schema)).toBe(false)
    }).pipe(Effect.provide(testLayer())))

  it.live("a schema holding another application's tables is foreign_database and is left untouched", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      const schema = yield* currentSchema
      yield* writer.write(sql`DROP FUNCTION baton_json_valid(text)`)
      yield* writer.write(sql`CREATE TABLE customers (id BIGINT PRIMARY KEY)`)
      const before = yield* objectsIn(schema)
      for (const readOnly of [false, true]) {
        const error = yield* openError({ url: pgUrl, schema, readOnly })
        expect(error.reason).toBe("foreign_database")
        expect(error.message).toBe(
          `schema "${schema}" already holds another application's tables (no flows_migrations ledger); choose another schema`
        )
      }
      expect(yield* objectsIn(schema)).toEqual(before)
    }).pipe(Effect.provide(testLayer())))

  it.live("no url and no DATABASE_URL is missing_url; DATABASE_URL comes from the ConfigProvider", () =>
    Effect.gen(function*() {
      const missing = yield* openError({}).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      expect(missing.reason).toBe("missing_url")
      expect(missing.message).toBe("PostgreSQL connection URL missing: pass { url } or set DATABASE_URL")
      const schema = yield* currentSchema
      const viaConfig = yield* Effect.provide(
        currentSchema,
        PgDatabase.layerClient({ schema, readOnly: true })
      ).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["DATABASE_URL", pgUrl]]))))
      expect(viaConfig).toBe(schema)
    }).pipe(Effect.provide(testLayer())))

  it.live("wrong dialects, malformed URLs and invalid schema names are refused before connecting", () =>
    Effect.gen(function*() {
      const mysql = yield* openError({ url: "mysql://root:pw@localhost/app" })
      expect(mysql.reason).toBe("wrong_dialect")
      expect(mysql.message).toBe("PgDatabase needs a postgres:// or postgresql:// URL, got a mysql:// URL")
      expect(mysql.target).not.toContain("pw@")
      const file = yield* openError({ url: "./baton.db" })
      expect(file.reason).toBe("wrong_dialect")
      expect(file.message).toBe("PgDatabase needs a postgres:// or postgresql:// URL, got a file path (use SqliteDatabase.layer)")
      const malformed = yield* openError({ url: "postgres://user:sec ret@[bad" })
      expect(malformed.reason).toBe("invalid_url")
      expect(malformed.message).toBe("the PostgreSQL URL is malformed")
      expect(JSON.stringify(malformed)).not.toContain("sec ret")
      for (const schema of ["Baton", "1abc", "has-dash", "", "a".repeat(64)]) {
        const invalid = yield* openError({ url: pgUrl, schema })
        expect(invalid.reason).toBe("invalid_schema")
        expect(invalid.message).toBe(
          `PostgreSQL schema "${schema}" is invalid: use 1-63 lowercase letters, digits or "_", starting with a letter or "_"`
        )
      }
    }))

  it.live("an unreachable port is connect_failed naming host, port and database, never the password", () =>
    Effect.gen(function*() {
      const error = yield* openError({
        url: Redacted.make("postgres://baton:s3cr3t-pw@127.0.0.1:1/appdb"),
        connectTimeout: "2 seconds"
      })
      expect(error.reason).toBe("connect_failed")
      expect(error.message).toBe("cannot connect to PostgreSQL at 127.0.0.1:1/appdb: connection refused")
      expect(error.target).toBe("postgres://baton:***@127.0.0.1:1/appdb")
      expect(error.message + error.target).not.toContain("s3cr3t")
      const viaQuery = yield* openError({ url: "postgres://baton@127.0.0.1:1/appdb?password=q-s3cr3t&sslmode=disable" })
      expect(viaQuery.target).toBe("postgres://baton@127.0.0.1:1/appdb?password=***&sslmode=disable")
      expect(viaQuery.message + viaQuery.target).not.toContain("s3cr3t")
    }))

  it.live("a database that does not exist is connect_failed with that reason", () =>
    Effect.gen(function*() {
      const target = new URL(pgUrl)
      target.pathname = "/baton_no_such_database"
      const error = yield* openError({ url: target.href })
      expect(error.reason).toBe("connect_failed")
      expect(error.message).toBe(
        `cannot connect to PostgreSQL at ${target.hostname}:${target.port || 5432}/baton_no_such_database: database does not exist`
      )
    }))

  it.live("the read-write open installs baton_json_valid; a ledger pass recreates it; a read-only open creates nothing (check 35)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* DurableWriter.DurableWriter
      const schema = yield* currentSchema
      expect(yield* objectsIn(schema)).toEqual(["baton_json_valid"])
      const verdicts = yield* sql<{ a: boolean; b: boolean; c: boolean | null }>`
        SELECT ${Dialect.jsonValid(sql, sql`'{"a":1}'`)} AS a, ${Dialect.jsonValid(sql, sql`'not json'`)} AS b,
               ${Dialect.jsonValid(sql, sql`NULL`)} AS c`
      expect(verdicts).toEqual([{ a: true, b: false, c: null }])
      yield* writer.write(sql`DROP FUNCTION baton_json_valid(text)`)
      const readOnlyObjects = yield* Effect.provide(objectsIn(schema), PgDatabase.layer({ url: pgUrl, schema, readOnly: true }))
      expect(readOnlyObjects).toEqual([])
      yield* Migrations.run([])
      expect(yield* objectsIn(schema)).toContain("baton_json_valid")
    }).pipe(Effect.provide(testLayer())))

  it.live("a jsonValid CHECK refuses \\u0000 and lone-surrogate escapes with constraint (check 35, PostgreSQL side)", () =>
    Effect.gen(function*() {
      expect(yield* jsonBackstop).toEqual({ outcomes: ["constraint", "constraint", "stored", "stored"], stored: [3, 4] })
    }).pipe(Effect.provide(testLayer())))

  it.live("layerPostgres drops its schema at scope close, after a write still in flight commits (check 30)", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(testLayer(), scope)
      const schema = yield* Effect.provide(currentSchema, context)
      const started = yield* Deferred.make<void>()
      const inFlight = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const writer = yield* DurableWriter.DurableWriter
        return yield* writer.write(Effect.gen(function*() {
          yield* sql`CREATE TABLE late (id BIGINT)`
          yield* Deferred.succeed(started, undefined)
          yield* sql`SELECT pg_sleep(0.5)`
          yield* sql`INSERT INTO late (id) VALUES (1)`
          return "committed"
        }))
      }).pipe(Effect.provide(context), Effect.forkDaemon)
      yield* Deferred.await(started)
      yield* Scope.close(scope, Exit.void)
      expect(yield* Fiber.join(inFlight)).toBe("committed")
      const remaining = yield* Effect.promise(() => rawQuery(pgUrl, "SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]))
      expect(remaining).toEqual([])
    }))
})
