/**
 * The lossy channel: a bounded in-process queue drained by one
 * writer fiber, 1..batchSize entries per `DurableWriter.write`, plus `flush`
 * and once-only loss reporting.
 *
 * Capacity counts entries not yet inside a writer transaction; an entry the
 * writer picked but whose transaction has not begun can still be evicted
 * (`drop-oldest`) and is then skipped, so at most `capacity + batchSize`
 * entries are ever held. Once the writer fiber ends (a defect kills it), the
 * channel is stopped: queued entries are lost and every later offer or flush
 * fails `sink_failed`.
 *
 * @internal
 */
import type { DatabaseError, Service as WriterService } from "@baton/database/DurableWriter"
import type { SqlError } from "@effect/sql/SqlError"
import { type Cause, Deferred, Effect, Exit, Queue } from "effect"
import type { EmitReceipt, JournalError, OverflowPolicy } from "../Journal.js"
import { isCompanionRunId, type SourceSeq } from "../JournalEvent.js"
import type { Admitted } from "./admission.js"
import { type AppendResult, appendLocked } from "./append.js"
import { sinkFailed } from "./errors.js"
import type { IdentityCache } from "./identityCache.js"
import type { NewEntry, Store } from "./store.js"

type Results = Array<{ readonly item: Item; readonly result: AppendResult }>

interface Item {
  readonly admitted: Admitted & { readonly sourceSeq: number }
  readonly eventId: string
  readonly ticket: number
  state: "queued" | "locked" | "evicted"
}

export interface LossyOptions {
  readonly capacity: number
  readonly overflow: OverflowPolicy
  readonly batchSize: number
  readonly store: Store
  readonly writer: WriterService
  readonly cache: IdentityCache
  /** Publish committed entries (cache, `changes`, followers). */
  readonly publish: (entries: ReadonlyArray<{ readonly entry: NewEntry; readonly contentKey: string }>) => Effect.Effect<void>
  /** Tell every in-process follower about a loss. */
  readonly failFollowers: (error: JournalError) => Effect.Effect<void>
  readonly overflowError: () => JournalError
}

export const makeLossy = (options: LossyOptions) => {
  const queue: Array<Item> = []
  const wake = Effect.runSync(Queue.sliding<void>(1))
  let enqueued = 0
  let done = 0
  let unreported: JournalError | undefined
  // Set once the writer fiber has ended (a defect, an interruption): nothing would drain the queue again.
  let stopped: JournalError | undefined
  let writing: ReadonlyArray<Item> = []
  const waiters: Array<{ readonly target: number; readonly deferred: Deferred.Deferred<void, JournalError> }> = []

  const remove = (item: Item): void => {
    const index = queue.indexOf(item)
    if (index >= 0) queue.splice(index, 1)
  }

  /** Queue one admitted entry; the receipt follows the overflow policy. */
  const offer = (
    admitted: Admitted & { readonly sourceSeq: number },
    eventId: string,
    contentKey: string
  ): Effect.Effect<EmitReceipt, JournalError> =>
    Effect.suspend((): Effect.Effect<EmitReceipt, JournalError> => {
      if (stopped !== undefined) return Effect.fail(stopped)
      const sourceSeq = admitted.sourceSeq as SourceSeq
      let evicted = 0
      if (queue.length >= options.capacity) {
        switch (options.overflow) {
          case "reject":
            return Effect.fail(options.overflowError())
          case "drop-newest":
            return Effect.succeed({ _tag: "Dropped", sourceSeq, policy: "drop-newest" } as const)
          case "drop-oldest": {
            const oldest = queue.shift()
            if (oldest !== undefined) {
              oldest.state = "evicted"
              options.cache.settlePending(oldest.eventId, oldest.admitted.runId, oldest.admitted.sourceId)
              evicted = 1
            }
          }
        }
      }
      options.cache.addPending(eventId, admitted.runId, admitted.sourceId, contentKey)
      queue.push({ admitted, eventId, ticket: ++enqueued, state: "queued" })
      Queue.unsafeOffer(wake, undefined)
      return Effect.succeed(
        evicted > 0 ? { _tag: "Accepted", sourceSeq, evicted } as const : { _tag: "Accepted", sourceSeq } as const
      )
    })

  const reportLoss = (error: JournalError): Effect.Effect<void> =>
    Effect.gen(function*() {
      yield* options.failFollowers(error)
      if (waiters.length > 0) {
        const waiting = waiters.splice(0, waiters.length)
        yield* Effect.forEach(waiting, (waiter) => Deferred.fail(waiter.deferred, error), { discard: true })
      } else if (unreported === undefined) {
        unreported = error
      }
    })

  const advance = (ticket: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      done = Math.max(done, ticket)
      const ready: Array<Deferred.Deferred<void, JournalError>> = []
      for (let i = waiters.length - 1; i >= 0; i--) {
        if (waiters[i]!.target <= done) ready.push(waiters.splice(i, 1)[0]!.deferred)
      }
      return Effect.forEach(ready, (deferred) => Deferred.succeed(deferred, undefined), { discard: true })
    })

  const takeUnreported = (): Effect.Effect<void, JournalError> =>
    Effect.suspend(() => {
      const loss = unreported
      unreported = undefined
      return loss === undefined ? Effect.void : Effect.fail(loss)
    })

  /** Wait until every entry queued before this call is committed or lost. */
  const flush: Effect.Effect<void, JournalError> = Effect.suspend(() => {
    if (stopped !== undefined) return Effect.fail(stopped)
    const target = enqueued
    if (done >= target) return takeUnreported()
    return Effect.gen(function*() {
      const deferred = yield* Deferred.make<void, JournalError>()
      waiters.push({ target, deferred })
      yield* Deferred.await(deferred)
      yield* takeUnreported()
    })
  })

  const writeBatch = (batch: ReadonlyArray<Item>) =>
    Effect.gen(function*() {
      const runs = [...new Set(batch.map((item) => item.admitted.runId))].sort()
      const schemaWide = runs.some(isCompanionRunId)
      const body = Effect.gen(function*() {
        // The transaction has begun: entries become part of it and leave the
        // evictable queue (a replay finds them already locked).
        const live = batch.filter((item) => {
          if (item.state === "queued") {
            item.state = "locked"
            remove(item)
          }
          return item.state === "locked"
        })
        const heads = new Map<string, number>()
        for (const runId of runs) {
          if (live.some((item) => item.admitted.runId === runId)) {
            heads.set(runId, (yield* options.store.lockHead(runId)) ?? 0)
          }
        }
        const results: Results = []
        for (const item of live) {
          const next = heads.get(item.admitted.runId)!
          const result = yield* appendLocked(options.store, options.cache, item.admitted, next)
          if (result._tag === "Appended") heads.set(item.admitted.runId, next + 1)
          results.push({ item, result })
        }
        for (const [runId, next] of heads) yield* options.store.setHead(runId, next)
        return results
      })
      // Keys: the smallest run's as the outermost write, the others nested in
      // ascending order; a companion id makes the batch schema-wide.
      const nested = schemaWide
        ? body
        : runs.slice(1).reduceRight<Effect.Effect<Results, SqlError | DatabaseError | JournalError>>(
          (inner, runId) => options.writer.write(inner, { key: runId }),
          body
        )
      const outcome = yield* options.writer.write(nested, schemaWide ? undefined : { key: runs[0]! }).pipe(Effect.either)
      for (const item of batch) {
        if (item.state === "queued") {
          // The transaction never began (its BEGIN failed): the entry is lost with the batch.
          item.state = "locked"
          remove(item)
        }
      }
      const lost = batch.filter((item) => item.state === "locked")
      for (const item of lost) options.cache.settlePending(item.eventId, item.admitted.runId, item.admitted.sourceId)
      if (outcome._tag === "Left") {
        yield* reportLoss(
          sinkFailed(`the lossy writer lost ${lost.length} queued entr${lost.length === 1 ? "y" : "ies"}`, outcome.left)
        )
      } else {
        const appended: Array<{ readonly entry: NewEntry; readonly contentKey: string }> = []
        for (const { result } of outcome.right) {
          if (result._tag === "Appended") appended.push(result)
          else if (result._tag === "Duplicate") {
            if (result.contentKey !== undefined) options.cache.commit(result.eventId, result.seq, result.contentKey)
          }
          else yield* reportLoss(result.error)
        }
        yield* options.publish(appended)
      }
      yield* advance(Math.max(...batch.map((item) => item.ticket)))
    })

  /** Fail every waiting flush (close, or the writer stopped). */
  const abandon = (error: JournalError): Effect.Effect<void> =>
    Effect.forEach(waiters.splice(0, waiters.length), (waiter) => Deferred.fail(waiter.deferred, error), {
      discard: true
    })

  /**
   * The writer has ended: every queued or in-flight entry is lost, pending and
   * later flushes and offers fail with `sink_failed`, followers are told.
   */
  const stop = (cause: Cause.Cause<unknown>): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (stopped !== undefined) return Effect.void
      const lost = [...new Set([...writing, ...queue])].filter((item) => item.state !== "evicted")
      queue.length = 0
      writing = []
      for (const item of lost) options.cache.settlePending(item.eventId, item.admitted.runId, item.admitted.sourceId)
      const error = sinkFailed(
        `the lossy writer stopped (${lost.length} queued entr${lost.length === 1 ? "y" : "ies"} lost); ` +
          "the lossy channel accepts no more entries",
        cause
      )
      stopped = error
      unreported = undefined
      return Effect.zipRight(
        lost.length > 0 ? options.failFollowers(error) : Effect.void,
        abandon(error)
      )
    })

  /**
   * The writer fiber's loop: drain, then sleep until the next offer. It never
   * fails; however it ends (a defect included), `stop` settles every waiter,
   * since the journal's close flushes and would otherwise wait forever.
   */
  const run: Effect.Effect<void> = Effect.forever(
    Effect.gen(function*() {
      yield* Queue.take(wake)
      while (queue.length > 0) {
        writing = queue.slice(0, options.batchSize)
        yield* writeBatch(writing)
        writing = []
      }
    })
  ).pipe(
    Effect.onExit((exit) => Exit.isFailure(exit) ? stop(exit.cause) : Effect.void),
    // The death is reported through flush; the fiber's own exit has no reader.
    Effect.catchAllCause(() => Effect.void)
  )

  return { offer, flush, run, abandon } as const
}

export type Lossy = ReturnType<typeof makeLossy>
