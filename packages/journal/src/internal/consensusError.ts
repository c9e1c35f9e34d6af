/**
 * `ConsensusError` (re-exported by `Consensus`).
 *
 * @internal
 */
import { Schema } from "effect"
import type { OwnerId } from "../OwnerId.js"

export class ConsensusError extends Schema.TaggedError<ConsensusError>()("@baton/journal/ConsensusError", {
  code: Schema.Literal("fence_lost", "persistence_failed", "invalid_input"),
  message: Schema.String,
  field: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Unknown)
}) {}

export const fenceLost = (runId: string, owner: OwnerId): ConsensusError =>
  new ConsensusError({
    code: "fence_lost",
    message: `run ${JSON.stringify(runId)} is not owned by the given owner (${owner.hostId}, pid ${owner.pid})`
  })

export const persistenceFailed = (operation: string, cause: unknown): ConsensusError =>
  new ConsensusError({ code: "persistence_failed", message: `Consensus.${operation}: lease storage failed`, cause })
