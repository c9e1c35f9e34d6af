/**
 * Dialect helpers (spec section 5; checks 1–4 and 35), written once and run against
 * SQLite and PostgreSQL layers.
 */
import { expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import type { Layer } from "effect"
import { failureOf } from "./migrationSuite.js"

type DatabaseLayer = Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, unknown>

const services = Effect.all({ sql: SqlClient.SqlClient, writer: DurableWriter.DurableWriter })

/** A boolean-ish SQL value as 1/0/null on both dialects. */
const truth = (sql: SqlClient.SqlClient, value: ReturnType<typeof Dialect.jsonValid>) =>
  sql`CASE WHEN ${value} THEN 1 WHEN NOT ${value} THEN 0 END`

export const dialectSuite = (layer: () => DatabaseLayer, options: { readonly postgres: boolean }) => {
  const test = (name: string, body: Effect.Effect<void, unknown, SqlClient.SqlClient | DurableWriter.DurableWriter>) =>
    it.effect(name, () => Effect.provide(body, layer()))

  test("isPostgres and isReadOnly describe the client", Effect.gen(function*() {
    const { sql } = yield* services
    expect(Dialect.isPostgres(sql)).toBe(options.postgres)
    expect(Dialect.isReadOnly(sql)).toBe(false)
  }))

  test("rowId, integer, isInteger and jsonValid build a table that refuses bad rows", Effect.gen(function*() {
    const { sql, writer } = yield* services
    yield* writer.write(sql`CREATE TABLE docs (
      ${Dialect.rowId(sql)}
      n ${Dialect.integer(sql)} NOT NULL CHECK (${Dialect.isInteger(sql, sql`n`)} AND n >= 0 AND n <= 9007199254740991),
      j TEXT CHECK (j IS NULL OR ${Dialect.jsonValid(sql, sql`j`)})
    )`)
    yield* writer.write(sql`INSERT INTO docs (n, j) VALUES (${1}, ${"{\"a\":1}"})`)
    yield* writer.write(sql`INSERT INTO docs (n, j) VALUES (${9007199254740991}, ${null})`)
    yield* writer.write(sql`INSERT INTO docs (n, j) VALUES (${2}, ${"[]"})`)
    const rows = yield* sql<{ readonly n: number }>`SELECT n FROM docs ORDER BY rowid`
    expect(rows.map((row) => Number(row.n))).toEqual([1, 9007199254740991, 2])
    for (const [n, j] of [[1.5, "{}"], [1, "not json"]] as const) {
      const error = failureOf(yield* Effect.exit(writer.write(sql`INSERT INTO docs (n, j) VALUES (${n}, ${j})`)))
      expect(error).toBeInstanceOf(DurableWriter.DatabaseError)
      expect(error.code).toBe("constraint")
    }
    expect((yield* sql`SELECT n FROM docs`).length).toBe(3)
  }))

  test("identity declares a surrogate key", Effect.gen(function*() {
    const { sql, writer } = yield* services
    yield* writer.write(sql`CREATE TABLE things (id ${Dialect.identity(sql)}, name TEXT NOT NULL)`)
    yield* writer.write(Effect.all([sql`INSERT INTO things (name) VALUES ('a')`, sql`INSERT INTO things (name) VALUES ('b')`]))
    const rows = yield* sql<{ readonly id: number; readonly name: string }>`SELECT id, name FROM things ORDER BY id`
    expect(rows.map((row) => [Number(row.id), row.name])).toEqual([[1, "a"], [2, "b"]])
  }))

  test("jsonText extracts scalars by path; a missing key is NULL; a bad path throws before SQL", Effect.gen(function*() {
    const { sql, writer } = yield* services
    yield* writer.write(sql`CREATE TABLE docs (j TEXT NOT NULL)`)
    yield* writer.write(sql`INSERT INTO docs (j) VALUES (${"{\"items\":[{\"name\":\"one\"}],\"flowId\":\"f\"}"})`)
    const [row] = yield* sql<{ readonly name: string | null; readonly missing: string | null; readonly flow: string | null }>`
      SELECT ${Dialect.jsonText(sql, sql`j`, "$.items[0].name")} AS name,
             ${Dialect.jsonText(sql, sql`j`, "$.items[3].name")} AS missing,
             ${Dialect.jsonText(sql, sql`docs.j`, "$.flowId")} AS flow
      FROM docs`
    expect(row).toEqual({ name: "one", missing: null, flow: "f" })
    const where = yield* sql`SELECT 1 AS hit FROM docs WHERE ${Dialect.jsonText(sql, sql`j`, "$.flowId")} = ${"f"}`
    expect(where.length).toBe(1)
    for (const path of ["$.a'b", "$", "items", "$.a b", "$[x]", "$..a", "$.a;DROP"]) {
      expect(() => Dialect.jsonText(sql, sql`j`, path)).toThrow()
    }
  }))

  test("greatest picks the larger of two values", Effect.gen(function*() {
    const { sql } = yield* services
    const [row] = yield* sql<{ readonly m: number }>`SELECT ${Dialect.greatest(sql)}(${3}, ${7}) AS m`
    expect(Number(row!.m)).toBe(7)
  }))

  test("trigger rejects, audits and ignores rows; dropTrigger removes it", Effect.gen(function*() {
    const { sql, writer } = yield* services
    const pg = Dialect.isPostgres(sql)
    yield* writer.write(Effect.all([
      sql`CREATE TABLE vals (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)`,
      sql`CREATE TABLE audit (id INTEGER NOT NULL)`,
      sql`CREATE TABLE quiet (value INTEGER NOT NULL)`
    ]))
    yield* writer.write(Effect.all([
      Dialect.trigger(sql, { name: "vals_no_negative", table: "vals", event: "BEFORE INSERT", when: "NEW.value < 0", reject: "negative" }),
      Dialect.trigger(sql, {
        name: "vals_audit",
        table: "vals",
        event: "AFTER DELETE",
        body: "INSERT INTO audit (id) VALUES (OLD.id);"
      }),
      Dialect.trigger(sql, { name: "quiet_skip", table: "quiet", event: "BEFORE INSERT", when: "NEW.value > 10", ignore: true })
    ]))
    const refused = yield* Effect.exit(writer.write(sql`INSERT INTO vals (id, value) VALUES (1, -1)`))
    const error = failureOf(refused)
    expect(error).toBeInstanceOf(DurableWriter.DatabaseError)
    expect(error.code).toBe("constraint")
    expect(String((error.cause as { cause?: { message?: string } }).cause?.message)).toContain("negative")
    yield* writer.write(sql`INSERT INTO vals (id, value) VALUES (2, 1)`)
    yield* writer.write(sql`DELETE FROM vals WHERE id = 2`)
    expect((yield* sql<{ readonly id: number }>`SELECT id FROM audit`).map((r) => Number(r.id))).toEqual([2])
    yield* writer.write(Effect.all([sql`INSERT INTO quiet (value) VALUES (5)`, sql`INSERT INTO quiet (value) VALUES (50)`]))
    expect((yield* sql<{ readonly value: number }>`SELECT value FROM quiet`).map((r) => Number(r.value))).toEqual([5])
    yield* writer.write(Dialect.dropTrigger(sql, "vals_no_negative", "vals"))
    yield* writer.write(Dialect.dropTrigger(sql, "vals_no_negative", "vals"))
    yield* writer.write(sql`INSERT INTO vals (id, value) VALUES (3, -1)`)
    expect((yield* sql<{ readonly value: number }>`SELECT value FROM vals`).map((r) => Number(r.value))).toEqual([-1])
    if (pg) {
      const functions = yield* sql`SELECT 1 FROM pg_proc WHERE proname = 'vals_no_negative_fn'`
      expect(functions.length).toBe(0)
    }
  }))

  test("trigger refuses bad options synchronously", Effect.gen(function*() {
    const { sql } = yield* services
    const base = { name: "t1", table: "vals", event: "BEFORE INSERT", reject: "no" } as const
    expect(() => Dialect.trigger(sql, { ...base, name: "bad name" })).toThrow()
    expect(() => Dialect.trigger(sql, { ...base, table: "vals; DROP" })).toThrow()
    expect(() => Dialect.trigger(sql, { ...base, event: "INSTEAD OF INSERT" })).toThrow()
    expect(() => Dialect.trigger(sql, { ...base, reject: "it's" })).toThrow()
    expect(() => Dialect.trigger(sql, { ...base, reject: "a\nb" })).toThrow()
    expect(() => Dialect.trigger(sql, { ...base, body: "SELECT 1;" })).toThrow()
    expect(() => Dialect.trigger(sql, { name: "t1", table: "vals", event: "BEFORE INSERT" })).toThrow()
    expect(() => Dialect.dropTrigger(sql, "x y", "vals")).toThrow()
  }))

  test("tables and columns list the schema", Effect.gen(function*() {
    const { sql, writer } = yield* services
    yield* writer.write(Effect.all([
      sql`CREATE TABLE zeta (b TEXT, a INTEGER, c TEXT)`,
      sql`CREATE TABLE alpha (x INTEGER)`
    ]))
    expect(yield* Dialect.tables(sql)).toEqual(["alpha", "zeta"])
    expect(yield* Dialect.columns(sql, "zeta")).toEqual(["b", "a", "c"])
    expect(yield* Dialect.columns(sql, "missing")).toEqual([])
  }))

  test("jsonValid answers true, false and NULL; CHECK backstop differs for NUL and lone surrogates", Effect.gen(function*() {
    const { sql, writer } = yield* services
    const [row] = yield* sql<{ readonly ok: number | null; readonly bad: number | null; readonly none: number | null }>`
      SELECT ${truth(sql, Dialect.jsonValid(sql, sql`${"{\"a\":1}"}`))} AS ok,
             ${truth(sql, Dialect.jsonValid(sql, sql`${"not json"}`))} AS bad,
             ${truth(sql, Dialect.jsonValid(sql, sql`CAST(NULL AS TEXT)`))} AS none`
    expect({ ok: Number(row!.ok), bad: Number(row!.bad), none: row!.none }).toEqual({ ok: 1, bad: 0, none: null })
    yield* writer.write(sql`CREATE TABLE docs (j TEXT CHECK (j IS NULL OR ${Dialect.jsonValid(sql, sql`j`)}))`)
    for (const text of ["{\"a\":\"\\u0000\"}", "{\"a\":\"\\ud800\"}"]) {
      const exit = yield* Effect.exit(writer.write(sql`INSERT INTO docs (j) VALUES (${text})`))
      if (options.postgres) expect(failureOf(exit).code).toBe("constraint")
      else expect(exit._tag).toBe("Success")
    }
    const stored = yield* sql`SELECT j FROM docs`
    expect(stored.length).toBe(options.postgres ? 0 : 2)
  }))
}
