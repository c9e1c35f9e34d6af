/**
 * The frame of a managed write (one opened by `DurableWriter.write`): which database
 * and transaction level it belongs to, the key locks it holds and its after-commit
 * registrations (docs/design/lock-order.md). Frames are provided to the write's body through the
 * context, so fibers forked inside a body see them too.
 *
 * @internal
 */
import type { Connection } from "@effect/sql/SqlConnection"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"

/** @internal */
export interface Frame {
  readonly database: object
  readonly parent: Frame | undefined
  /** Outermost schema-wide write on PostgreSQL: no other transaction can hold a key. */
  readonly exclusive: boolean
  /**
   * Whether registrations here can reach an outermost managed commit: false for a
   * write joined to a raw transaction or raw savepoint, whose hooks could never run.
   */
  readonly managed: boolean
  readonly keys: Set<string>
  readonly hooks: Array<Effect.Effect<void>>
  conn: Connection | undefined
  depth: number
  closed: boolean
  /** A write joined without a savepoint failed here; committing this frame is refused. */
  poisoned: boolean
}

/** @internal */
export const ManagedWrite = Context.GenericTag<Frame>("@baton/database/internal/ManagedWrite")

/** @internal */
export const make = (options: {
  readonly database: object
  readonly parent: Frame | undefined
  readonly exclusive: boolean
  readonly managed: boolean
}): Frame => ({
  database: options.database,
  parent: options.parent,
  exclusive: options.exclusive,
  managed: options.managed,
  keys: new Set(),
  hooks: [],
  conn: undefined,
  depth: -1,
  closed: false,
  poisoned: false
})

/**
 * `body`, then a defect instead of success when a write joined to `frame` without a
 * savepoint failed and its failure was caught: its partial work cannot be undone alone,
 * so the frame's transaction or savepoint must roll back. @internal
 */
export const refusePoisoned = <A, E, R>(frame: Frame, body: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(body, (value) =>
    frame.poisoned
      ? Effect.dieMessage(
        "DurableWriter: a write joined without a savepoint failed and its failure was caught; the enclosing transaction was rolled back"
      )
      : Effect.succeed(value))

/** Whether the transaction `frame` belongs to already holds `key`'s lock. @internal */
export const holdsKey = (frame: Frame | undefined, key: string): boolean => {
  for (let current = frame; current !== undefined; current = current.parent) {
    if (current.exclusive || current.keys.has(key)) return true
  }
  return false
}
