/**
 * Checks 33–35: attempt puts, lifecycle and admission.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Data, Effect, Layer, Option } from "effect"
import { captureSql } from "../support/capture.js"
import { A, B, type MakeStack, pending } from "../support/stack.js"

const base = { runId: "r", stepKeyDigest: "step", attempt: 0, state: "running", startedAtMs: 10, meta: { a: 1, b: [1, 2] } }
const id = { runId: "r", stepKeyDigest: "step", attempt: 0 }

/** A failure with no database cause, raised inside a store's write after its SQL ran. */
class WriteVetoed extends Data.TaggedError("WriteVetoed")<{}> {}

/**
 * The context's writer, except that every write body ends by failing `WriteVetoed`
 * (rolled back). The writer's type has no room for a foreign failure, which is what
 * the stores must still map; hence the cast.
 */
const vetoingWriter = Effect.map(DurableWriter.DurableWriter, (writer): DurableWriter.Service => ({
  write: <A, E, R>(body: Effect.Effect<A, E, R>, options?: DurableWriter.WriteOptions) =>
    writer.write(Effect.zipRight(body, Effect.fail(new WriteVetoed())), options) as Effect.Effect<never, never, R>,
  // A single statement is vetoed the same way: inside a transaction, so its row change rolls back too.
  statement: <A, E, R>(body: Effect.Effect<A, E, R>, options?: { readonly key?: string }) =>
    writer.write(Effect.zipRight(body, Effect.fail(new WriteVetoed())), options) as Effect.Effect<never, never, R>
}))

export const attemptsSuite = (makeStack: MakeStack) => {
  const run = <X, E>(effect: Effect.Effect<X, E, any>) => Effect.provide(effect, makeStack())
  const owned = Effect.gen(function*() {
    const store = yield* RunStore.RunStore
    yield* store.create("r", "{}")
    yield* store.claimAndOwn("r", pending, A, 0)
    return yield* AttemptStore.AttemptStore
  })

  it.effect("33: put outcomes", () =>
    run(Effect.gen(function*() {
      const attempts = yield* owned
      expect(yield* attempts.put(base, A)).toEqual({ _tag: "Inserted" })
      expect(yield* attempts.put(base, A)).toEqual({ _tag: "ExistingSame" })
      expect(yield* attempts.put({ ...base, meta: { b: [1, 2], a: 1 } }, A)).toEqual({ _tag: "ExistingSame" })
      expect(yield* attempts.put({ ...base, meta: { a: 2, b: [1, 2] } }, A)).toEqual({ _tag: "Conflict" })
      expect(yield* attempts.put({ ...base, meta: { a: 1, b: [2, 1] } }, A)).toEqual({ _tag: "Conflict" })
      expect(yield* attempts.put(base, { ...A, nonce: "stale" })).toEqual({ _tag: "FenceLost" })
      expect(yield* attempts.put({ ...base, runId: "nope" }, A)).toEqual({ _tag: "RunNotFound" })
      const stored = yield* attempts.get(base)
      expect(Option.getOrThrow(stored)).toEqual(base)
    })))

  it.effect("33: a put that inserts and a finish that lands are one statement each, the fence inside; only a miss reads the fence", () =>
    run(Effect.gen(function*() {
      const attempts = yield* owned
      const inserted = yield* captureSql(attempts.put(base, A))
      expect(inserted.value).toEqual({ _tag: "Inserted" })
      expect(inserted.statements.length).toBe(1)
      expect(inserted.statements[0]).toMatch(/INSERT INTO flows_attempts/)
      const lost = yield* captureSql(attempts.put({ ...base, attempt: 1 }, { ...A, nonce: "stale" }))
      expect(lost.value).toEqual({ _tag: "FenceLost" })
      expect(lost.statements.length).toBe(2)
      expect(yield* attempts.get({ ...id, attempt: 1 })).toEqual(Option.none())
      // A guarded update that lands is one statement too, on either dialect.
      const finished = yield* captureSql(attempts.finish({ ...id, state: "succeeded", finishedAtMs: 20 }, A))
      expect(finished.value).toEqual({ _tag: "Finished" })
      expect(finished.statements.length).toBe(1)
    })))

  it.effect("33: upsert mode rewrites in-progress attempts only", () =>
    Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      yield* store.create("r", "{}")
      yield* store.claimAndOwn("r", pending, A, 0)
      const attempts = yield* AttemptStore.makeWith({ putMode: "upsert" })
      yield* attempts.put(base, A)
      expect(yield* attempts.put({ ...base, meta: { changed: true } }, A)).toEqual({ _tag: "Upserted" })
      expect(Option.getOrThrow(yield* attempts.get(base)).meta).toEqual({ changed: true })
      yield* attempts.finish({ ...id, state: "succeeded", finishedAtMs: 20 }, A)
      expect(yield* attempts.put({ ...base, meta: { again: true } }, A)).toEqual({ _tag: "Conflict" })
    }).pipe(Effect.provide(makeStack())))

  it.effect("34: attempt lifecycle", () =>
    run(Effect.gen(function*() {
      const attempts = yield* owned
      const store = yield* RunStore.RunStore
      const sql = yield* SqlClient.SqlClient
      yield* attempts.put(base, A)
      expect(yield* attempts.heartbeat("r", "step", 0, A, 12, { cp: 1 })).toEqual({ _tag: "Updated" })
      expect(yield* attempts.heartbeat("r", "step", 0, A, 13)).toEqual({ _tag: "Updated" })
      let stored = Option.getOrThrow(yield* attempts.get(base))
      expect([stored.heartbeatAtMs, stored.checkpoint]).toEqual([13, { cp: 1 }])
      expect(yield* attempts.heartbeat("r", "other", 0, A, 13)).toEqual({ _tag: "NotFound" })
      expect(yield* attempts.finish({ ...id, state: "succeeded", finishedAtMs: 20, outcome: { ok: 1 } }, A)).toEqual({
        _tag: "Finished"
      })
      expect(yield* attempts.heartbeat("r", "step", 0, A, 30)).toEqual({ _tag: "StateChanged" })
      expect(yield* attempts.finish({ ...id, state: "failed", finishedAtMs: 21, outcome: { ok: 2 } }, A)).toEqual({
        _tag: "StateChanged"
      })
      stored = Option.getOrThrow(yield* attempts.get(base))
      expect([stored.heartbeatAtMs, stored.outcome, stored.meta, stored.state, stored.finishedAtMs]).toEqual([
        13,
        { ok: 1 },
        base.meta,
        "succeeded",
        20
      ])
      expect(yield* attempts.patch(base, { error: { late: true } }, A)).toEqual({ _tag: "Patched" })
      expect(Option.getOrThrow(yield* attempts.get(base)).error).toEqual({ late: true })
      expect(yield* attempts.list("r")).toEqual([Option.getOrThrow(yield* attempts.get(base))])
      yield* attempts.put({ ...base, attempt: 1 }, A)
      yield* sql`UPDATE flows_runs SET owner_nonce = 'moved' WHERE run_id = 'r'`
      expect(yield* attempts.heartbeat("r", "step", 1, A, 40)).toEqual({ _tag: "FenceLost" })
      yield* sql`UPDATE flows_runs SET owner_nonce = 'a' WHERE run_id = 'r'`
      yield* store.transitionOwned("r", A, "completed")
      expect(yield* attempts.patch(base, { error: { later: true } }, A)).toEqual({ _tag: "FenceLost" })
      expect(yield* attempts.patch({ ...base, attempt: 9 }, {}, A)).toEqual({ _tag: "NotFound" })
      expect(yield* attempts.finish({ ...id, attempt: 1, state: "failed", finishedAtMs: 5 }, B)).toEqual({
        _tag: "FenceLost"
      })
    })))

  it.effect("35: attempt admission refuses bad input with invalid_attempt and no cause", () =>
    run(Effect.gen(function*() {
      const attempts = yield* owned
      const bad: Array<unknown> = [
        { ...base, attempt: -1 },
        { ...base, state: "" },
        { ...base, startedAtMs: NaN },
        { ...base, meta: { n: BigInt(1) } },
        { ...base, checkpoint: "x".repeat(1024 * 1024) },
        { ...base, extra: 1 },
        { ...base, meta: { s: "\uD800" } }
      ]
      for (const attempt of bad) {
        const error = yield* Effect.flip(attempts.put(attempt as AttemptStore.Attempt, A))
        expect([error.code, error.cause]).toEqual(["invalid_attempt", undefined])
      }
      const finishing = yield* Effect.flip(attempts.finish({ ...id, state: "running", finishedAtMs: 1 }, A))
      expect(finishing.code).toBe("invalid_attempt")
      expect(yield* attempts.list("r")).toEqual([])
      const built = yield* Effect.either(Layer.build(AttemptStore.layerWith({ maxCheckpointBytes: 0 })).pipe(Effect.scoped))
      expect(built._tag === "Left" && built.left.code).toBe("invalid_attempt")
    })))

  it.effect("a non-database failure inside an attempt write fails persistence_failed with a persistence_failed cause, like a run write", () =>
    run(Effect.gen(function*() {
      yield* owned
      const sql = yield* SqlClient.SqlClient
      const real = yield* AttemptStore.AttemptStore
      yield* real.put(base, A)
      const before = yield* sql`SELECT * FROM flows_attempts`
      const vetoing = yield* vetoingWriter
      const attempts = yield* Effect.provideService(AttemptStore.make, DurableWriter.DurableWriter, vetoing)
      const failures = [
        ["put", yield* Effect.flip(attempts.put({ ...base, attempt: 1 }, A))],
        ["heartbeat", yield* Effect.flip(attempts.heartbeat("r", "step", 0, A, 12, { cp: 1 }))],
        ["finish", yield* Effect.flip(attempts.finish({ ...id, state: "succeeded", finishedAtMs: 20 }, A))],
        ["patch", yield* Effect.flip(attempts.patch(id, { error: { late: true } }, A))]
      ] as const
      for (const [method, error] of failures) {
        expect([error.code, error.method, error.message, error.cause]).toEqual([
          "persistence_failed",
          method,
          `persistence_failed: AttemptStore.${method}: the store could not complete the operation`,
          { category: "persistence_failed", reason: "WriteVetoed" }
        ])
      }
      // Each vetoed write rolled back: the attempt rows are as they were.
      expect(yield* sql`SELECT * FROM flows_attempts`).toEqual(before)
      const runs = yield* Effect.provideService(RunStore.make, DurableWriter.DurableWriter, vetoing)
      const runError = yield* Effect.flip(runs.create("r2", "{}"))
      expect([runError.code, runError.cause]).toEqual(["persistence_failed", { category: "persistence_failed", reason: "WriteVetoed" }])
    })))
}
