/**
 * `PgDatabase` option validation (spec 4.6): bad pool, timeout and writer options fail
 * the open with a typed `DatabaseOpenError` naming the option and the rule, before any
 * connection is made or schema created.
 */
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"

const url = TestDatabase.postgresTestUrl("options-pg")

const openError = (options: PgDatabase.PgDatabaseOptions) =>
  Layer.build(PgDatabase.layer(options)).pipe(Effect.scoped, Effect.flip)

const schemaExists = (schema: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql`SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = ${schema}`, (rows) => rows.length > 0))

describe.skipIf(url === undefined)("PgDatabase option validation", () => {
  const pgUrl = url!
  const cases: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
    ["maxConnections -1", { maxConnections: -1 }, "maxConnections: must be a positive safe integer (got -1)"],
    ["maxConnections NaN", { maxConnections: Number.NaN }, "maxConnections: must be a positive safe integer (got NaN)"],
    ["maxConnections 0", { maxConnections: 0 }, "maxConnections: must be a positive safe integer (got 0)"],
    ["lockTimeout -5", { lockTimeout: -5 }, "lockTimeout: must be a positive finite duration (got -5)"],
    ["lockTimeout infinite", { lockTimeout: "Infinity" }, "lockTimeout: must be a positive finite duration"],
    ["connectTimeout 0", { connectTimeout: 0 }, "connectTimeout: must be a positive finite duration (got 0)"],
    ["statementTimeout 0", { statementTimeout: 0 }, "statementTimeout: must be a positive finite duration (got 0)"],
    [
      "idleInTransactionTimeout -1",
      { idleInTransactionTimeout: -1 },
      "idleInTransactionTimeout: must be a positive finite duration (got -1)"
    ],
    ["keepAliveInitialDelay soon", { keepAliveInitialDelay: "soon" }, "keepAliveInitialDelay: must be a positive finite duration"],
    [
      "statementTimeout thirty days",
      { statementTimeout: "30 days" },
      "statementTimeout: must be at most 2147483647 milliseconds (got \"30 days\")"
    ],
    [
      "lockTimeout past statementTimeout",
      { lockTimeout: "20 seconds" },
      "lockTimeout: must be shorter than statementTimeout (15 seconds by default)"
    ],
    [
      "statementTimeout under lockTimeout",
      { statementTimeout: "5 seconds" },
      "statementTimeout: must be longer than lockTimeout (10 seconds by default)"
    ],
    ["applicationName number", { applicationName: 7 }, "applicationName: must be a string (got 7)"],
    ["writer.maxAttempts -1", { writer: { maxAttempts: -1 } }, "writer.maxAttempts: must be a positive safe integer"],
    [
      "writer.baseDelayMs NaN",
      { writer: { baseDelayMs: Number.NaN } },
      "writer.baseDelayMs: must be a non-negative finite number of milliseconds"
    ],
    ["url number", { url: 5 }, "url: must be a string or a Redacted string"]
  ]
  for (const [name, extra, rule] of cases) {
    it.live(`${name}: typed open failure naming the option, no schema created`, () =>
      Effect.gen(function*() {
        const schema = `opts_${name.replace(/[^a-z]/gi, "").toLowerCase()}`.slice(0, 40)
        const error = yield* openError({ url: pgUrl, schema, ...extra } as PgDatabase.PgDatabaseOptions)
        expect(error._tag).toBe("@baton/database/DatabaseOpenError")
        expect(error.reason).toBe("invalid_url")
        expect(error.message).toContain(`PgDatabase option ${rule}`)
        expect(error.message).not.toContain("postgres://")
        expect(yield* schemaExists(schema)).toBe(false)
      }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl))))
  }

  it.live("a non-string schema is invalid_schema, not a crash", () =>
    Effect.gen(function*() {
      const error = yield* openError({ url: pgUrl, schema: ["baton"] as unknown as string })
      expect(error.reason).toBe("invalid_schema")
    }))

  it.live("valid options open and query", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ one: number }>`SELECT 1 AS one`
      expect(rows).toEqual([{ one: 1 }])
    }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl))))
})
