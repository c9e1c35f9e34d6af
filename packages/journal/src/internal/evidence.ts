/**
 * The liveness evidence schema (re-exported by `Consensus`).
 *
 * @internal
 */
import { Schema } from "effect"
import { OwnerId } from "../OwnerId.js"

export const LivenessEvidence = Schema.Struct({
  expectedOwner: OwnerId,
  checkedAtMs: Schema.Number,
  kind: Schema.Literal("same-host-pid-dead", "cross-host-unreachable-stale", "lease-expired")
})

export type LivenessEvidence = typeof LivenessEvidence.Type
