import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Deferred, Effect, Exit, Fiber, Option, Ref } from "effect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as TestDatabase from "@baton/database/TestDatabase"

const settle = Effect.repeatN(Effect.yieldNow(), 50)

const setup = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const writer = yield* DurableWriter.DurableWriter
  yield* writer.write(sql`CREATE TABLE items (name TEXT NOT NULL)`)
  const names = Effect.map(sql<{ readonly name: string }>`SELECT name FROM items ORDER BY rowid`, (rows) =>
    rows.map((row) => row.name))
  const started = yield* Deferred.make<void>()
  const release = yield* Deferred.make<void>()
  const holder = yield* Effect.fork(writer.write(Effect.gen(function*() {
    yield* sql`INSERT INTO items (name) VALUES ('holder')`
    yield* Deferred.succeed(started, undefined)
    yield* Deferred.await(release)
  })))
  yield* Deferred.await(started)
  return { sql, writer, names, holder, release }
})

describe("DurableWriter in-process queue", () => {
  it.effect("an interrupted queued write returns at once without running its body", () =>
    Effect.gen(function*() {
      const { holder, names, release, sql, writer } = yield* setup
      const ran = yield* Ref.make(false)
      const queued = yield* Effect.fork(
        writer.write(Effect.zipRight(Ref.set(ran, true), sql`INSERT INTO items (name) VALUES ('queued')`))
      )
      yield* settle
      const exit = yield* Fiber.interrupt(queued)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(yield* Ref.get(ran)).toBe(false)
      // The holder is undisturbed: still open, and it commits normally.
      expect(Option.isNone(yield* Fiber.poll(holder))).toBe(true)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      expect(yield* names).toEqual(["holder"])
      // The gate is free again.
      yield* writer.write(sql`INSERT INTO items (name) VALUES ('after')`)
      expect(yield* names).toEqual(["holder", "after"])
    }).pipe(Effect.provide(TestDatabase.layer)))

  it.live("a queued write that times out runs nothing", () =>
    Effect.gen(function*() {
      const { holder, names, release, sql, writer } = yield* setup
      const exit = yield* Effect.exit(writer.write(sql`INSERT INTO items (name) VALUES ('late')`).pipe(Effect.timeout("10 millis")))
      expect(Exit.isFailure(exit)).toBe(true)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      expect(yield* names).toEqual(["holder"])
    }).pipe(Effect.provide(TestDatabase.layer)))

  it.effect("an uninterruptible queued write commits after the holder", () =>
    Effect.gen(function*() {
      const { holder, names, release, sql, writer } = yield* setup
      const queued = yield* Effect.fork(Effect.uninterruptible(writer.write(sql`INSERT INTO items (name) VALUES ('cleanup')`)))
      yield* settle
      const interrupting = yield* Effect.fork(Fiber.interrupt(queued))
      yield* settle
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(interrupting)
      expect(yield* names).toEqual(["holder", "cleanup"])
    }).pipe(Effect.provide(TestDatabase.layer)))

  it.effect("queued writes commit in arrival order", () =>
    Effect.gen(function*() {
      const { holder, names, release, sql, writer } = yield* setup
      const queued: Array<Fiber.RuntimeFiber<unknown, unknown>> = []
      for (const name of ["q1", "q2", "q3", "q4", "q5"]) {
        queued.push(yield* Effect.fork(writer.write(sql`INSERT INTO items (name) VALUES (${name})`, { key: name })))
        yield* settle
      }
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Effect.forEach(queued, Fiber.join)
      expect(yield* names).toEqual(["holder", "q1", "q2", "q3", "q4", "q5"])
    }).pipe(Effect.provide(TestDatabase.layer)))
})
