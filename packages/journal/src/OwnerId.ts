/**
 * The fencing token: process identity plus a nonce callers mint per claim.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { Identifier } from "./JournalEvent.js"

/**
 * `{ hostId, pid, nonce }`: `hostId`/`nonce` are identifiers (1..1024 units),
 * `pid` a non-negative safe integer. Equality is on all three fields
 * (`Consensus.sameOwner`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const OwnerId = Schema.Struct({
  hostId: Identifier,
  pid: Schema.Int.pipe(Schema.nonNegative()),
  nonce: Identifier
})

/**
 * @since 0.1.0
 * @category models
 */
export interface OwnerId {
  readonly hostId: string
  readonly pid: number
  readonly nonce: string
}
