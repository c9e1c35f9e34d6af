/**
 * Companion streams: facts about a run kept beside its own stream (at
 * `companionRunId(stream, runId)`), so positional readers of the run never see
 * them and its compaction never deletes them. The run store writes its
 * ownership facts here (stream `run-store`, source `flows.run-store`).
 *
 * @since 0.1.0
 */
import { Effect, Either, Option, Schema } from "effect"
import * as Journal from "./Journal.js"
import * as JournalEvent from "./JournalEvent.js"
import { invalid } from "./internal/errors.js"
import * as FactJoin from "./internal/factJoin.js"

/**
 * A fact about the run `runId` (not the companion id).
 *
 * @since 0.1.0
 * @category models
 */
export interface Fact {
  readonly stream: string
  readonly sourceId: string
  readonly runId: string
  readonly eventType: string
  readonly payload: Readonly<Record<string, unknown>>
}

/**
 * The run store's companion stream and source.
 *
 * @since 0.1.0
 * @category constants
 */
export const runStore = { stream: "run-store", sourceId: "flows.run-store" } as const

const decodeRunId = Schema.decodeUnknownEither(JournalEvent.RunId)

const companionOf = (stream: string, runId: string, prefix: string) => {
  if (typeof stream !== "string" || !JournalEvent.isCompanionStreamName(stream)) {
    return Either.left(invalid(`${prefix}.stream`, "must match ^[a-z0-9][a-z0-9.-]{0,63}$"))
  }
  if (Either.isLeft(decodeRunId(runId))) {
    return Either.left(invalid(`${prefix}.runId`, "must be an identifier (1..1024 characters, no NUL or unpaired surrogate)"))
  }
  return Either.right(JournalEvent.companionRunId(stream, runId))
}

/**
 * Append `fact` durably (unfenced) to its companion stream inside
 * `journal.transact(…, { key: fact.runId, savepoint: false })`: joined to the
 * caller's write without a savepoint (a failed fact fails that write), a
 * rolled-back transition leaves no fact. `payload.runId` and `meta.runId` name
 * the real run. Without a `Journal` in context it writes nothing.
 *
 * @since 0.1.0
 * @category operations
 */
export const append = (fact: Fact): Effect.Effect<void, Journal.JournalError> =>
  Effect.gen(function*() {
    const journal = yield* Effect.serviceOption(Journal.Journal)
    if (Option.isNone(journal)) return
    const runId = yield* companionOf(fact.stream, fact.runId, "fact")
    yield* journal.value.transact(
      journal.value.emitDurableUnfenced({
        runId,
        sourceId: fact.sourceId,
        eventType: fact.eventType,
        payload: { ...fact.payload, runId: fact.runId },
        meta: { runId: fact.runId }
      }).pipe(Effect.locally(FactJoin.joinWithoutSavepoint, true)),
      // A fact belongs to the write that states it: no savepoint of its own.
      { key: fact.runId, savepoint: false }
    )
  })

/**
 * `facts` (one run, one stream and source, in order) made ready to append
 * inside the caller's own PostgreSQL statement (`Journal.PreparedAppend`), so a
 * move of the run and its facts are one round trip; `None` without a `Journal`
 * in context. Admitted as `append` admits (`invalid_event` naming the field).
 *
 * @since 0.2.0
 * @category contract
 */
export const prepare = (
  facts: ReadonlyArray<Fact>
): Effect.Effect<Option.Option<Journal.PreparedAppend>, Journal.JournalError> =>
  Effect.gen(function*() {
    const journal = yield* Effect.serviceOption(Journal.Journal)
    if (Option.isNone(journal)) return Option.none()
    const inputs: Array<JournalEvent.Input> = []
    for (const fact of facts) {
      const runId = yield* companionOf(fact.stream, fact.runId, "fact")
      inputs.push({
        runId,
        sourceId: fact.sourceId,
        eventType: fact.eventType,
        payload: { ...fact.payload, runId: fact.runId },
        meta: { runId: fact.runId }
      })
    }
    return Option.some(yield* journal.value.prepareAppend(inputs))
  })

/**
 * One page of the companion stream `stream` of `runId` (`limit` default 100).
 *
 * @since 0.1.0
 * @category operations
 */
export const entries = (
  stream: string,
  runId: string,
  options: { readonly after?: number; readonly eventTypes?: ReadonlyArray<string>; readonly limit?: number } = {}
): Effect.Effect<Journal.EntriesPage, Journal.JournalError, Journal.Journal> =>
  Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const companion = yield* companionOf(stream, runId, "options")
    return yield* journal.entries({
      runId: companion,
      after: options.after,
      eventTypes: options.eventTypes,
      limit: options.limit ?? 100
    })
  })
