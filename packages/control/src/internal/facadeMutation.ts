/**
 * The facade's mutation protocol (docs/design/control.md): actor-scoped durable keys, request
 * fingerprints, and `mutate` — lookup, optional run-key claim, effect and
 * receipt, all in one journal transaction under the instance's semaphore.
 */
import type * as Journal from "@baton/journal/Journal"
import { Effect } from "effect"
import * as ControlError from "../ControlError.js"
import type * as ControlRuntime from "../ControlRuntime.js"
import type * as ControlSchema from "../ControlSchema.js"
import { canonical, sha256 } from "./canonical.js"
import { requireKey } from "./facadeBoundary.js"

export const sourceId = "@baton/control"

export interface Facade {
  readonly runtime: ControlRuntime.Service
  readonly journal: Journal.Service
  readonly semaphore: Effect.Semaphore
}

type Actor = { readonly id: string; readonly kind: string }

/** `<operation>:actor:<sha256 of the canonical actor>:<key>`. */
export const mutationKey = (operation: string, key: string, principal: Actor): Effect.Effect<string> =>
  Effect.map(
    sha256(canonical({ id: principal.id, kind: principal.kind })),
    (actor) => `${operation}:actor:${actor}:${key}`
  )

/**
 * The intent of an admitted input: the input minus the two fields a server
 * stamps (top-level `principal` and `message.principal`).
 */
export const intentOf = (input: Record<string, unknown>): Record<string, unknown> => {
  const { principal: _principal, ...rest } = input
  const message = rest.message
  if (typeof message === "object" && message !== null && !Array.isArray(message)) {
    const { principal: _messagePrincipal, ...body } = message as Record<string, unknown>
    return { ...rest, message: body }
  }
  return rest
}

/** `control-mutation:v2:<sha256 of { operation, actor, intent }>`. */
export const fingerprint = (operation: string, principal: Actor, intent: unknown): Effect.Effect<string> =>
  Effect.map(
    sha256(canonical({ operation, actor: { id: principal.id, kind: principal.kind }, intent })),
    (digest) => `control-mutation:v2:${digest}`
  )

/** What a keyed verb works with after its preamble; spreads into `MutateOptions`. */
export interface Keyed {
  readonly operation: string
  /** The acting principal, stamped with the runtime's clock. */
  readonly principal: ControlSchema.Principal
  /** The caller's idempotency key (receipt ids). */
  readonly key: string
  /** The actor-scoped durable key (`mutationKey`). */
  readonly durableKey: string
  /** The request fingerprint (`fingerprint` of the input's intent). */
  readonly fingerprint: string
}

/**
 * The preamble every keyed verb shares, after admission: the key's rule, the stamped
 * principal (from `submitted`), the durable key and the fingerprint, both under `namespace`
 * (default `operation`; `run` with a Resume input shares `resume`'s keys).
 */
export const keyed = (
  facade: Facade,
  operation: string,
  input: { readonly idempotencyKey: string },
  submitted: Actor | undefined,
  namespace: string = operation
): Effect.Effect<Keyed, ControlError.InvalidInput | ControlError.PersistenceError> =>
  Effect.gen(function*() {
    yield* requireKey(operation, input.idempotencyKey)
    const principal = yield* facade.runtime.stampPrincipal(
      submitted === undefined ? undefined : { id: submitted.id, kind: submitted.kind }
    )
    const key = input.idempotencyKey
    return {
      operation,
      principal,
      key,
      durableKey: yield* mutationKey(namespace, key, principal),
      fingerprint: yield* fingerprint(namespace, principal, intentOf(input as unknown as Record<string, unknown>))
    }
  })

const isJournalError = (error: unknown): error is Journal.JournalError =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "@baton/journal/JournalError"

/** Maps a journal failure to `PersistenceError` naming the step. */
export const persistence = (operation: string) => (error: unknown): ControlError.PersistenceError =>
  new ControlError.PersistenceError({
    operation,
    message: typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
      ? error.message
      : String(error),
    cause: error
  })

/** Runs `effect` in one journal transaction (keyed when `key` is given); journal failures become `PersistenceError`. */
export const transact = <A, E>(
  facade: Facade,
  operation: string,
  effect: Effect.Effect<A, E>,
  key?: string
): Effect.Effect<A, Exclude<E, Journal.JournalError> | ControlError.PersistenceError> =>
  facade.journal.transact(effect, key === undefined ? undefined : { key }).pipe(
    Effect.catchIf(isJournalError, (error) => Effect.fail(persistence(operation)(error)))
  ) as Effect.Effect<A, Exclude<E, Journal.JournalError> | ControlError.PersistenceError>

/** Appends one control event (unfenced) on `partition`; answers its journal sequence. */
export const emit = (
  facade: Facade,
  partition: string,
  eventType: string,
  payload: Record<string, unknown>
): Effect.Effect<number, ControlError.PersistenceError> =>
  facade.journal.emitDurableUnfenced({ runId: partition, sourceId, eventType, payload }).pipe(
    Effect.map((receipt) => receipt.seq as number),
    Effect.mapError(persistence(`journal ${eventType}`))
  )

/**
 * Appends one control event (unfenced) on each of `events`' partitions, in order: prepared appends of the
 * enclosing write (through the runtime's `appendPrepared` when it has one), with no savepoint or key
 * lock of their own. Only for partitions this write creates
 * (a start's new runs), which no other writer can reach before it commits.
 */
export const emitFresh = (
  facade: Facade,
  eventType: string,
  events: ReadonlyArray<{ readonly partition: string; readonly payload: Record<string, unknown> }>
): Effect.Effect<void, ControlError.PersistenceError> =>
  Effect.gen(function*() {
    const prepared = yield* Effect.forEach(
      events,
      ({ partition, payload }) => facade.journal.prepareAppend([{ runId: partition, sourceId, eventType, payload }])
    )
    const appendAll = facade.runtime.appendPrepared
    if (appendAll !== undefined) return yield* appendAll(prepared)
    yield* Effect.forEach(prepared, (p) => p.append, { discard: true })
  }).pipe(Effect.mapError((error) => error._tag === "PersistenceError" ? error : persistence(`journal ${eventType}`)(error)))

/** The replay answer a stored receipt stands for. */
export const replayOf = (receipt: ControlSchema.Receipt, key: string): ControlSchema.Receipt => {
  switch (receipt._tag) {
    case "Conflict":
      return { _tag: "Conflict", message: `idempotency key ${key} was used for another mutation` }
    case "Accepted":
    case "AlreadyApplied":
      return {
        _tag: "AlreadyApplied",
        receiptId: receipt.receiptId,
        ...(receipt.runId !== undefined ? { runId: receipt.runId } : {})
      }
    case "Terminal":
      return { _tag: "AlreadyApplied", receiptId: key, runId: receipt.runId }
    case "Parked":
      return { _tag: "AlreadyApplied", receiptId: key }
  }
}

export interface MutateOptions {
  readonly operation: string
  /** The caller's idempotency key (receipt ids). */
  readonly key: string
  /** The actor-scoped durable key. */
  readonly durableKey: string
  readonly fingerprint: string
  /** Lock key: the target run's id for per-run verbs; absent = schema-wide. */
  readonly lockKey?: string | undefined
  readonly replay: boolean
  readonly claimRunKey: boolean
}

/**
 * One facade mutation: under the semaphore, in one journal transaction,
 * look up the key, optionally claim the run key, run `effect` with the prior
 * receipt, then record the receipt (or release the run key for `Parked`).
 */
export const mutate = <E>(
  facade: Facade,
  options: MutateOptions,
  effect: (prior: ControlSchema.Receipt | undefined) => Effect.Effect<ControlSchema.Receipt, E>
): Effect.Effect<ControlSchema.Receipt, E | ControlError.PersistenceError | ControlError.InvalidInput> => {
  const { runtime } = facade
  const body = Effect.gen(function*() {
    const prior = yield* runtime.lookupMutation(options.durableKey, options.fingerprint)
    if (prior !== undefined && prior._tag === "Conflict") return replayOf(prior, options.key)
    if (prior !== undefined && options.replay) return replayOf(prior, options.key)
    let claimed = false
    if (options.claimRunKey) {
      // The runtime refuses a key another fingerprint holds with `InvalidInput` naming the durable key;
      // that is a concurrent reuse of the key for another request, answered like a sequential one.
      const claim = yield* runtime.claimRunKey(options.durableKey, options.fingerprint).pipe(
        Effect.catchTag("InvalidInput", () => Effect.succeed({ _tag: "Taken" as const }))
      )
      if (claim._tag === "Taken") return replayOf({ _tag: "Conflict", message: "" }, options.key)
      if (claim._tag === "Raced") return replayOf(claim.receipt, options.key)
      claimed = true
    }
    // A failure with a held claim releases it (inside a SQL transaction the rollback already does;
    // outside one, a kept claim would strand the key).
    const receipt = yield* (claimed
      ? effect(prior).pipe(Effect.onError(() => Effect.ignore(runtime.releaseRunKey(options.durableKey))))
      : effect(prior))
    if (receipt._tag === "Parked" && options.claimRunKey) {
      yield* runtime.releaseRunKey(options.durableKey)
    } else if (prior === undefined) {
      yield* runtime.recordMutation(options.durableKey, options.fingerprint, receipt)
    }
    return receipt
  })
  return facade.semaphore.withPermits(1)(
    transact(facade, `${options.operation}.idempotency`, body, options.lockKey)
  ) as Effect.Effect<ControlSchema.Receipt, E | ControlError.PersistenceError | ControlError.InvalidInput>
}
