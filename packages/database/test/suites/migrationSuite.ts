/**
 * Ledger behaviour (spec section 8; checks 16–20), written once and run against
 * SQLite and PostgreSQL layers.
 */
import { expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Effect, Exit, Layer, Ref } from "effect"
import * as Dialect from "@baton/database/Dialect"
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"

type DatabaseLayer = Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, unknown>

export const createTable = (name: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`CREATE TABLE ${name} (id INTEGER PRIMARY KEY)`))

/** Sets `a` (offset 0) and `b` (offset 1000) of check 16, recording the order effects ran in. */
export const sets = (log: Ref.Ref<ReadonlyArray<string>>) => {
  const step = (name: string) => Effect.zipRight(Ref.update(log, (all) => [...all, name]), createTable(`t_${name}`))
  const a: Migrations.MigrationSet = { namespace: "a", idOffset: 0, migrations: { "0001_init": step("a1") } }
  const b: Migrations.MigrationSet = {
    namespace: "b",
    idOffset: 1000,
    migrations: { "0001_x": step("b1"), "0002_y": step("b2") }
  }
  return { a, b }
}

/** Everything a pass could change: table names and ledger rows. */
export const snapshot = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const tables = yield* Dialect.tables(sql)
  const ledger = tables.includes(Migrations.table)
    ? yield* sql<{ readonly migration_id: number; readonly namespace: string; readonly name: string }>`
        SELECT migration_id, namespace, name FROM flows_migrations ORDER BY migration_id`
    : []
  return { tables, ledger: ledger.map((row) => ({ ...row, migration_id: Number(row.migration_id) })) }
})

export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  if (Exit.isFailure(exit) && exit.cause._tag === "Fail") return exit.cause.error
  throw new Error(`expected a typed failure, got ${Exit.isSuccess(exit) ? "success" : Cause.pretty(exit.cause)}`)
}

export const migrationSuite = (layer: () => DatabaseLayer) => {
  const test = (name: string, body: Effect.Effect<void, unknown, SqlClient.SqlClient | DurableWriter.DurableWriter>) =>
    it.effect(name, () => Effect.provide(body, layer()))

  test("a fresh pass applies every block in ascending global id and records it", Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const { a, b } = sets(log)
    const applied = yield* Migrations.run([b, a])
    expect(applied).toEqual([
      { id: 1, namespace: "a", name: "init" },
      { id: 1001, namespace: "b", name: "x" },
      { id: 1002, namespace: "b", name: "y" }
    ])
    expect(yield* Ref.get(log)).toEqual(["a1", "b1", "b2"])
    expect((yield* snapshot).ledger).toEqual([
      { migration_id: 1, namespace: "a", name: "init" },
      { migration_id: 1001, namespace: "b", name: "x" },
      { migration_id: 1002, namespace: "b", name: "y" }
    ])
    const stamps = yield* sql<{ readonly applied_at_ms: number }>`SELECT applied_at_ms FROM flows_migrations`
    for (const row of stamps) expect(Number.isSafeInteger(Number(row.applied_at_ms))).toBe(true)
  }))

  test("a second pass returns [] and runs nothing; status shows all applied", Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const { a, b } = sets(log)
    yield* Migrations.run([a, b])
    yield* Ref.set(log, [])
    expect(yield* Migrations.run([b, a])).toEqual([])
    expect(yield* Ref.get(log)).toEqual([])
    const status = yield* Migrations.status([a, b])
    expect(status.applied.map((m) => m.id)).toEqual([1, 1001, 1002])
    expect(status.pending).toEqual([])
    expect(status.foreign).toEqual([])
  }))

  test("status before any pass creates nothing and lists everything pending", Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const { a, b } = sets(log)
    const before = yield* snapshot
    const status = yield* Migrations.status([a, b])
    expect(status.pending.map((m) => m.id)).toEqual([1, 1001, 1002])
    expect(status.applied).toEqual([])
    expect(yield* snapshot).toEqual(before)
  }))

  test("a ledger ahead of the code is refused and nothing changes; an unclaimed block is foreign", Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const { a, b } = sets(log)
    yield* Migrations.run([a, b])
    yield* sql`INSERT INTO flows_migrations (migration_id, namespace, name, applied_at_ms) VALUES (5001, 'other', 'z', 0)`
    const foreign = yield* Migrations.status([a, b])
    expect(foreign.foreign).toEqual([{ id: 5001, namespace: "other", name: "z" }])
    expect(yield* Migrations.run([a, b])).toEqual([])
    yield* sql`INSERT INTO flows_migrations (migration_id, namespace, name, applied_at_ms) VALUES (1003, 'b', 'z', 0)`
    const before = yield* snapshot
    const newer: Migrations.MigrationSet = { ...a, migrations: { ...a.migrations, "0002_more": createTable("t_more") } }
    const error = failureOf(yield* Effect.exit(Migrations.run([newer, b])))
    expect(error).toBeInstanceOf(Migrations.MigrationError)
    expect(error).toMatchObject({
      reason: "ahead",
      migrationId: 1003,
      message:
        "the database is ahead of this build: migration 1003 of b is recorded, but b declares migrations only up to 1002; upgrade b or open another database"
    })
    expect(yield* snapshot).toEqual(before)
    expect(failureOf(yield* Effect.exit(Migrations.status([a, b])))).toMatchObject({ reason: "ahead" })
  }))

  const invalidSets: ReadonlyArray<readonly [string, ReadonlyArray<Migrations.MigrationSet>, string]> = [
    ["duplicate namespace", [{ namespace: "a", idOffset: 0, migrations: {} }, { namespace: "a", idOffset: 1000, migrations: {} }], "duplicate migration namespace \"a\""],
    ["bad namespace", [{ namespace: "A_b", idOffset: 0, migrations: {} }], "invalid migration namespace \"A_b\""],
    ["duplicate offset", [{ namespace: "a", idOffset: 0, migrations: {} }, { namespace: "b", idOffset: 0, migrations: {} }], "migration offset 0 is used by both a and b"],
    ["negative offset", [{ namespace: "a", idOffset: -1000, migrations: {} }], "migration offset -1000 of a must be a non-negative safe multiple of 1000"],
    ["fractional offset", [{ namespace: "a", idOffset: 1000.5, migrations: {} }], "migration offset 1000.5 of a must be a non-negative safe multiple of 1000"],
    ["offset not a multiple", [{ namespace: "a", idOffset: 1500, migrations: {} }], "migration offset 1500 of a must be a non-negative safe multiple of 1000"],
    ["unsafe offset", [{ namespace: "a", idOffset: 2 ** 60, migrations: {} }], `migration offset ${2 ** 60} of a must be a non-negative safe multiple of 1000`],
    ["malformed key", [{ namespace: "a", idOffset: 0, migrations: { "init": Effect.void } }], "migration key \"init\" of a is not \"<digits>_<name>\""],
    ["uppercase name", [{ namespace: "a", idOffset: 0, migrations: { "0001_Init": Effect.void } }], "migration key \"0001_Init\" of a is not \"<digits>_<name>\""],
    ["local id 0", [{ namespace: "a", idOffset: 0, migrations: { "0000_zero": Effect.void } }], "migration key \"0000_zero\" of a has local id 0000; local ids run from 1 to 999"],
    ["local id 1000", [{ namespace: "a", idOffset: 0, migrations: { "1000_big": Effect.void } }], "migration key \"1000_big\" of a has local id 1000; local ids run from 1 to 999"],
    ["one id twice", [{ namespace: "a", idOffset: 0, migrations: { "0001_a": Effect.void, "01_b": Effect.void } }], "migration id 1 is declared twice in a: \"0001_a\" and \"01_b\""],
    ["migrations not a record", [{ namespace: "a", idOffset: 0, migrations: null as never }], "migrations of a must be a record of \"<digits>_<name>\" keys to migration effects"],
    ["a migration that is not an Effect", [{ namespace: "a", idOffset: 0, migrations: { "0001_a": "CREATE TABLE t (x)" as never } }], "migration \"0001_a\" of a is not an Effect"],
    ["a set that is not an object", [null as never], "a migration set must be an object"]
  ]
  for (const [name, input, message] of invalidSets) {
    test(`invalid_set: ${name}`, Effect.gen(function*() {
      const before = yield* snapshot
      const error = failureOf(yield* Effect.exit(Migrations.run(input)))
      expect(error).toMatchObject({ _tag: "@baton/database/MigrationError", reason: "invalid_set", message })
      expect(yield* snapshot).toEqual(before)
      expect(failureOf(yield* Effect.exit(Migrations.status(input)))).toMatchObject({ reason: "invalid_set", message })
      // The same refusal without a database, for hosts that check before they open one.
      expect(Migrations.validate(input)).toMatchObject({ _tag: "@baton/database/MigrationError", reason: "invalid_set", message })
    }))
  }

  test("sets are snapshotted when run is called", Effect.gen(function*() {
    const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = { "0001_one": createTable("t_one") }
    const pass = Migrations.run([{ namespace: "app", idOffset: 10_000, migrations }])
    migrations["0002_two"] = createTable("t_two")
    expect((yield* pass).map((m) => m.id)).toEqual([10_001])
  }))

  test("validate accepts a valid composition", Effect.sync(() => {
    expect(Migrations.validate([{ namespace: "app", idOffset: 10_000, migrations: { "0001_one": createTable("t_one") } }])).toBeUndefined()
  }))

  test("an empty set is allowed", Effect.gen(function*() {
    expect(yield* Migrations.run([{ namespace: "empty", idOffset: 3000, migrations: {} }])).toEqual([])
  }))

  test("a recorded migration is named by its id and package, never by its stored name", Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const { a, b } = sets(log)
    yield* Migrations.run([a, b])
    const stored = "x\nfake: line"
    yield* sql`INSERT INTO flows_migrations (migration_id, namespace, name, applied_at_ms) VALUES (1999, ${"b\nforged"}, ${stored}, 0)`
    const ahead = failureOf(yield* Effect.exit(Migrations.run([a, b])))
    expect(ahead).toMatchObject({
      reason: "ahead",
      migrationId: 1999,
      message:
        "the database is ahead of this build: migration 1999 of b is recorded, but b declares migrations only up to 1002; upgrade b or open another database"
    })
    yield* sql`DELETE FROM flows_migrations WHERE migration_id = 1999`
    yield* sql`UPDATE flows_migrations SET name = ${stored} WHERE migration_id = 1001`
    const renamed = failureOf(yield* Effect.exit(Migrations.run([a, b])))
    expect(renamed).toMatchObject({ reason: "history_mismatch", migrationId: 1001 })
    const removed = failureOf(yield* Effect.exit(Migrations.run([a, { ...b, migrations: { "0002_y": Effect.void } }])))
    expect(removed).toMatchObject({ reason: "history_mismatch", migrationId: 1001 })
    for (const error of [ahead, renamed, removed]) {
      expect(error.message).not.toContain("fake")
      expect(error.message).not.toContain("forged")
      expect(error.message).not.toContain("\n")
    }
  }))

  test("a renamed, a removed and a re-owned recorded migration are history mismatches", Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const { a, b } = sets(log)
    yield* Migrations.run([a, b])
    const before = yield* snapshot
    const renamed: Migrations.MigrationSet = { ...b, migrations: { "0001_renamed": Effect.void, "0002_y": Effect.void } }
    expect(failureOf(yield* Effect.exit(Migrations.run([a, renamed])))).toMatchObject({
      reason: "history_mismatch",
      migrationId: 1001,
      message: "migration 1001 of b is recorded under another name than this build declares (b_renamed)"
    })
    const removed: Migrations.MigrationSet = { ...b, migrations: { "0002_y": Effect.void } }
    expect(failureOf(yield* Effect.exit(Migrations.run([a, removed])))).toMatchObject({
      reason: "history_mismatch",
      migrationId: 1001,
      message: "migration 1001 of b is recorded but no longer declared by b; migrations are append-only"
    })
    const moved: Migrations.MigrationSet = { namespace: "c", idOffset: 1000, migrations: b.migrations }
    expect(failureOf(yield* Effect.exit(Migrations.run([a, moved])))).toMatchObject({
      reason: "history_mismatch",
      message: "migration 1001 of c is recorded under another name than this build declares (c_x)"
    })
    expect(failureOf(yield* Effect.exit(Migrations.status([a, renamed])))).toMatchObject({ reason: "history_mismatch" })
    expect(yield* snapshot).toEqual(before)
  }))

  test("a new migration below an applied one is a hole; status lists it as pending", Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const b: Migrations.MigrationSet = { namespace: "b", idOffset: 1000, migrations: { "0002_y": createTable("t_y") } }
    yield* Migrations.run([b])
    const before = yield* snapshot
    const withHole: Migrations.MigrationSet = { ...b, migrations: { "0001_x": createTable("t_x"), ...b.migrations } }
    expect(failureOf(yield* Effect.exit(Migrations.run([withHole])))).toMatchObject({
      reason: "hole",
      migrationId: 1001,
      message: "1001 (b_x) is new but sits below already applied migration 1002 of b; append new migrations after the last one"
    })
    expect(yield* snapshot).toEqual(before)
    const status = yield* Migrations.status([withHole])
    expect(status.pending.map((m) => m.id)).toEqual([1001])
    expect(yield* Ref.get(log)).toEqual([])
  }))

  test("a failing migration rolls the whole pass back; after the fix a re-run applies all", Effect.gen(function*() {
    const before = yield* snapshot
    const broken: Migrations.MigrationSet = {
      namespace: "app",
      idOffset: 10_000,
      migrations: {
        "0001_one": createTable("t_one"),
        "0002_two": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO no_such_table VALUES (1)`),
        "0003_three": createTable("t_three")
      }
    }
    const error = failureOf(yield* Effect.exit(Migrations.run([broken])))
    expect(error).toBeInstanceOf(Migrations.MigrationError)
    expect(error).toMatchObject({ reason: "failed", migrationId: 10_002 })
    expect((error as Migrations.MigrationError).message).toMatch(/^migration 10002 \(app_two\) failed: .*no_such_table/)
    const after = yield* snapshot
    expect(after.tables.filter((t) => t !== Migrations.table)).toEqual(before.tables.filter((t) => t !== Migrations.table))
    expect(after.ledger).toEqual([])
    const fixed: Migrations.MigrationSet = { ...broken, migrations: { ...broken.migrations, "0002_two": createTable("t_two") } }
    expect((yield* Migrations.run([fixed])).map((m) => m.id)).toEqual([10_001, 10_002, 10_003])
    expect((yield* snapshot).tables).toEqual(expect.arrayContaining(["t_one", "t_two", "t_three"]))
  }))

  test("a migration failing with an app error or a defect is failed with its message", Effect.gen(function*() {
    const typed: Migrations.MigrationSet = { namespace: "a", idOffset: 0, migrations: { "0001_x": Effect.fail(new Error("nope")) } }
    expect(failureOf(yield* Effect.exit(Migrations.run([typed])))).toMatchObject({
      reason: "failed",
      message: "migration 1 (a_x) failed: nope"
    })
    const defect: Migrations.MigrationSet = { namespace: "a", idOffset: 0, migrations: { "0001_x": Effect.dieMessage("bug") } }
    expect(failureOf(yield* Effect.exit(Migrations.run([defect])))).toMatchObject({
      reason: "failed",
      message: "migration 1 (a_x) failed: bug"
    })
    expect((yield* snapshot).ledger).toEqual([])
  }))

  test("Migrations.layer under provideMerge exposes a migrated database", Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const { a } = sets(log)
    const tables = yield* Effect.flatMap(SqlClient.SqlClient, Dialect.tables).pipe(
      Effect.provide(Layer.provideMerge(Migrations.layer([a]), layer()))
    )
    expect(tables).toEqual(expect.arrayContaining(["flows_migrations", "t_a1"]))
  }))
}
