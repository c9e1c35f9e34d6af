import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Effect, Exit, Layer, Metric, Random, Ref } from "effect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as TestDatabase from "@baton/database/TestDatabase"
import { driveClock, successOf } from "./support/driveClock.js"
import { driverError, sqlError } from "./support/sqlErrors.js"

const retries = Effect.map(Metric.value(DurableWriter.writeRetries), (state) => state.count)

/** A body that fails with `failures[i]` on attempt i+1, then inserts a row. */
const scripted = (attempts: Ref.Ref<number>, failures: ReadonlyArray<unknown>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const attempt = yield* Ref.updateAndGet(attempts, (n) => n + 1)
    yield* sql`INSERT INTO items (attempt) VALUES (${attempt})`
    const failure = failures[attempt - 1]
    if (failure !== undefined) return yield* Effect.fail(failure)
    return attempt
  })

const withItems = <A, E>(
  body: (ctx: { readonly sql: SqlClient.SqlClient; readonly writer: DurableWriter.Service; readonly rows: Effect.Effect<ReadonlyArray<number>, unknown> }) => Effect.Effect<A, E, SqlClient.SqlClient | DurableWriter.DurableWriter>
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter
    yield* writer.write(sql`CREATE TABLE items (attempt INTEGER NOT NULL)`)
    const rows = Effect.map(sql<{ readonly attempt: number }>`SELECT attempt FROM items ORDER BY attempt`, (r) =>
      r.map((row) => row.attempt))
    return yield* body({ sql, writer, rows })
  })

describe("DurableWriter retry policy", () => {
  it.effect("busy then serialization failure then success commits on attempt 3 with 2 counted replays and capped delays", () =>
    withItems(({ rows, writer }) =>
      Effect.gen(function*() {
        const attempts = yield* Ref.make(0)
        const before = yield* retries
        const { exit, slept } = yield* driveClock(
          writer.write(scripted(attempts, [sqlError("SQLITE_BUSY", "database is locked"), sqlError("40001")]))
        ).pipe(Effect.withRandom(Random.fixed([1])))
        expect(successOf(exit)).toBe(3)
        expect((yield* retries) - before).toBe(2)
        // Jitter 1.2: 50 × 1.2 = 60, then 100 × 1.2 = 120 capped at 60.
        expect(slept).toEqual([60, 60])
        expect(yield* rows).toEqual([3])
      })
    ).pipe(Effect.provide(TestDatabase.layerWith({ writer: { baseDelayMs: 50, maxDelayMs: 60 } }))))

  it.effect("delays grow exponentially with the lowest jitter", () =>
    withItems(({ writer }) =>
      Effect.gen(function*() {
        const attempts = yield* Ref.make(0)
        const busy = sqlError("SQLITE_BUSY")
        const { exit, slept } = yield* driveClock(writer.write(scripted(attempts, [busy, busy, busy])))
          .pipe(Effect.withRandom(Random.fixed([0])))
        expect(successOf(exit)).toBe(4)
        expect(slept).toEqual([40, 80, 160])
      })
    ).pipe(Effect.provide(TestDatabase.layer)))

  it.effect("an always-busy body fails busy after exactly maxAttempts attempts", () =>
    withItems(({ rows, writer }) =>
      Effect.gen(function*() {
        const attempts = yield* Ref.make(0)
        const before = yield* retries
        const busy = sqlError("SQLITE_BUSY")
        const { exit } = yield* driveClock(writer.write(scripted(attempts, Array(10).fill(busy))))
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) {
          const error = Cause.squash(exit.cause)
          expect(error).toBeInstanceOf(DurableWriter.DatabaseError)
          expect((error as DurableWriter.DatabaseError).code).toBe("busy")
        }
        expect(yield* Ref.get(attempts)).toBe(3)
        expect((yield* retries) - before).toBe(2)
        expect(yield* rows).toEqual([])
      })
    ).pipe(Effect.provide(TestDatabase.layerWith({ writer: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 } }))))

  // Invalid retry options are refused (a defect naming the option), never clamped: see options.test.ts.
  for (const maxAttempts of [0, 1.5, -3, Number.NaN]) {
    it.effect(`maxAttempts ${maxAttempts} is refused at construction`, () =>
      Effect.gen(function*() {
        const exit = yield* Layer.build(TestDatabase.layerWith({ writer: { maxAttempts } })).pipe(Effect.scoped, Effect.exit)
        expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
        if (Exit.isFailure(exit)) expect(String(Cause.squash(exit.cause))).toContain("maxAttempts: must be a positive safe integer")
      }))
  }

  const neverRetried: ReadonlyArray<readonly [string, unknown, DurableWriter.DatabaseErrorCode | undefined]> = [
    ["SQLITE_CONSTRAINT_UNIQUE", sqlError("SQLITE_CONSTRAINT_UNIQUE"), "constraint"],
    ["23505", sqlError("23505"), "constraint"],
    ["SQLITE_READONLY", sqlError("SQLITE_READONLY"), "read_only"],
    ["25006", sqlError("25006"), "read_only"],
    ["SQLITE_CORRUPT", sqlError("SQLITE_CORRUPT"), "corrupt"],
    ["SQLITE_FULL", sqlError("SQLITE_FULL"), "full"],
    ["SQLITE_IOERR_WRITE", sqlError("SQLITE_IOERR_WRITE"), "io"],
    ["42P01", sqlError("42P01"), "schema"],
    ["an unknown code", sqlError("ZZ_WEIRD"), "unknown"],
    ["SQLITE_IOERR caused by SQLITE_BUSY", sqlError("SQLITE_IOERR", "disk", driverError("SQLITE_BUSY")), "io"],
    ["a plain Error without SQL provenance", new Error("database is locked"), undefined],
    ["an app error", { _tag: "AppError" }, undefined]
  ]
  for (const [name, failure, code] of neverRetried) {
    it.effect(`${name} runs the body once and reports ${code ?? "the error unchanged"}`, () =>
      withItems(({ rows, writer }) =>
        Effect.gen(function*() {
          const attempts = yield* Ref.make(0)
          const before = yield* retries
          const { exit } = yield* driveClock(writer.write(scripted(attempts, Array(5).fill(failure))))
          expect(yield* Ref.get(attempts)).toBe(1)
          expect((yield* retries) - before).toBe(0)
          expect(yield* rows).toEqual([])
          expect(Exit.isFailure(exit)).toBe(true)
          if (Exit.isFailure(exit)) {
            const error = Cause.squash(exit.cause)
            if (code === undefined) {
              expect(error).not.toBeInstanceOf(DurableWriter.DatabaseError)
              expect(DurableWriter.codeOf(error)).toBeUndefined()
              // Effect may wrap an Error in a span proxy: compare what it says.
              if (failure instanceof Error) expect((error as Error).message).toBe(failure.message)
              else expect(error).toEqual(failure)
            } else {
              expect(error).toBeInstanceOf(DurableWriter.DatabaseError)
              expect((error as DurableWriter.DatabaseError).code).toBe(code)
            }
          }
        })
      ).pipe(Effect.provide(TestDatabase.layerWith({ writer: { baseDelayMs: 1, maxDelayMs: 1 } }))))
  }

  it.effect("a defect carrying a busy SqlError is replayed (transaction control fails as defects upstream)", () =>
    withItems(({ writer }) =>
      Effect.gen(function*() {
        const attempts = yield* Ref.make(0)
        const body = Effect.flatMap(Ref.updateAndGet(attempts, (n) => n + 1), (n) =>
          n === 1 ? Effect.die(sqlError("SQLITE_BUSY")) : Effect.succeed(n))
        const { exit } = yield* driveClock(writer.write(body))
        expect(successOf(exit)).toBe(2)
      })
    ).pipe(Effect.provide(TestDatabase.layerWith({ writer: { baseDelayMs: 1, maxDelayMs: 1 } }))))

  it.effect("a store error whose cause is a busy SqlError, or a bare busy DatabaseError, is replayed", () =>
    withItems(({ writer }) =>
      Effect.gen(function*() {
        const storeError = { _tag: "StoreError", code: "sink_failed", cause: sqlError("SQLITE_BUSY") }
        const bare = new DurableWriter.DatabaseError({ code: "busy" })
        const attempts = yield* Ref.make(0)
        const { exit } = yield* driveClock(writer.write(scripted(attempts, [storeError, bare])))
        expect(successOf(exit)).toBe(3)
      })
    ).pipe(Effect.provide(TestDatabase.layerWith({ writer: { baseDelayMs: 1, maxDelayMs: 1 } }))))

  it.effect("a nested body failing busy runs once and the outer body is replayed", () =>
    withItems(({ sql, writer, rows }) =>
      Effect.gen(function*() {
        const outer = yield* Ref.make(0)
        const inner = yield* Ref.make(0)
        const body = Effect.gen(function*() {
          const attempt = yield* Ref.updateAndGet(outer, (n) => n + 1)
          yield* writer.write(Effect.gen(function*() {
            yield* Ref.update(inner, (n) => n + 1)
            yield* sql`INSERT INTO items (attempt) VALUES (${attempt})`
            if (attempt === 1) return yield* Effect.fail(sqlError("SQLITE_BUSY"))
          }))
        })
        const { exit } = yield* driveClock(writer.write(body))
        successOf(exit)
        expect(yield* Ref.get(outer)).toBe(2)
        expect(yield* Ref.get(inner)).toBe(2)
        expect(yield* rows).toEqual([2])
      })
    ).pipe(Effect.provide(TestDatabase.layerWith({ writer: { baseDelayMs: 1, maxDelayMs: 1 } }))))

  it.effect("a hook registered in a replayed attempt runs once in total", () =>
    withItems(({ writer }) =>
      Effect.gen(function*() {
        const attempts = yield* Ref.make(0)
        const hooks = yield* Ref.make(0)
        const body = Effect.gen(function*() {
          const attempt = yield* Ref.updateAndGet(attempts, (n) => n + 1)
          expect(yield* DurableWriter.afterCommit(Ref.update(hooks, (n) => n + 1))).toBe(true)
          if (attempt < 3) return yield* Effect.fail(sqlError("40P01"))
        })
        const { exit } = yield* driveClock(writer.write(body))
        successOf(exit)
        expect(yield* Ref.get(attempts)).toBe(3)
        expect(yield* Ref.get(hooks)).toBe(1)
      })
    ).pipe(Effect.provide(TestDatabase.layerWith({ writer: { baseDelayMs: 1, maxDelayMs: 1 } }))))

  it.effect("interruption is never retried", () =>
    withItems(({ writer }) =>
      Effect.gen(function*() {
        const attempts = yield* Ref.make(0)
        const exit = yield* Effect.exit(writer.write(Effect.zipRight(Ref.update(attempts, (n) => n + 1), Effect.interrupt)))
        expect(Exit.isInterrupted(exit)).toBe(true)
        expect(yield* Ref.get(attempts)).toBe(1)
      })
    ).pipe(Effect.provide(TestDatabase.layer)))
})
