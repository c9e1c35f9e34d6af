/**
 * Run ancestry vocabulary: how a run came to exist relative to other runs.
 *
 * A run is a root (no origin), a `child` spawned by a parent, a `fork` made by
 * time travel, or a `continuation` (a trampoline round of one logical run).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * How a non-root run was created. Absent means a root run.
 *
 * @since 0.1.0
 * @category models
 */
export const Origin = Schema.Literal("child", "fork", "continuation")

/**
 * @since 0.1.0
 * @category models
 */
export type Origin = typeof Origin.Type

/**
 * The ancestry facts a projection gathered for one run.
 *
 * - `parentRunId`: the run's parent (trampoline predecessor, creating spawn edge or recorded parent).
 * - `roundOrdinal`: the run's round within its lineage (0 = first round).
 * - `forked`: a `flows.time-travel.fork-created` entry exists on the run's stream.
 *
 * @since 0.1.0
 * @category models
 */
export interface Ancestry {
  readonly parentRunId?: string | undefined
  readonly roundOrdinal?: number | undefined
  readonly forked?: boolean | undefined
}

/**
 * Classifies a run's origin. A fork also records a parent, so the fork marker
 * wins; a round above 0 is a continuation; any other run with a parent is a
 * child; otherwise the run is a root and the answer is `undefined`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const originOf = (ancestry: Ancestry): Origin | undefined => {
  if (ancestry.forked === true) return "fork"
  if (ancestry.roundOrdinal !== undefined && ancestry.roundOrdinal > 0) return "continuation"
  if (ancestry.parentRunId !== undefined && ancestry.parentRunId !== "") return "child"
  return undefined
}

/**
 * Journal event type an engine writes when it decides a run's next round.
 *
 * @since 0.1.0
 * @category constants
 */
export const runDecisionEventType = "flows.engine.run-decision" as const

/**
 * Journal event type marking a forked run (written on the child's own stream).
 *
 * @since 0.1.0
 * @category constants
 */
export const forkCreatedEventType = "flows.time-travel.fork-created" as const

/**
 * Journal event type for lineage facts control records about a run.
 *
 * @since 0.1.0
 * @category constants
 */
export const lineageEventType = "control.run.lineage" as const
