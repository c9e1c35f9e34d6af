/**
 * Ownership facts on the run's companion stream (docs/design/journal.md), appended through the
 * journal's `Companion.append` inside the caller's write. With no `Journal`
 * in context the append is a no-op.
 */
import * as JournalCompanion from "@baton/journal/Companion"
import { Effect } from "effect"
import { ownershipEventType, type OwnerIdType, type OwnershipTransition } from "./model.js"

export interface Fact {
  readonly transition: OwnershipTransition
  readonly owner: OwnerIdType
  readonly grantedAtMs: number | null
}

export const fact = (transition: OwnershipTransition, owner: OwnerIdType, grantedAtMs: number | null): Fact => ({
  transition,
  owner,
  grantedAtMs
})

/** Appends `facts` in order as the last step of the write. */
export const appendAll = (runId: string, facts: ReadonlyArray<Fact>) =>
  Effect.forEach(facts, (f) => JournalCompanion.append(toJournalFact(runId, f)), { discard: true })

const toJournalFact = (runId: string, f: Fact): JournalCompanion.Fact => ({
  stream: JournalCompanion.runStore.stream,
  sourceId: JournalCompanion.runStore.sourceId,
  runId,
  eventType: ownershipEventType(f.transition),
  payload: {
    runId,
    owner: { hostId: f.owner.hostId, pid: f.owner.pid, nonce: f.owner.nonce },
    grantedAtMs: f.grantedAtMs
  }
})

/** PostgreSQL: `facts` ready to append inside the move's own statement; `None` when there are none or no `Journal`. */
export const prepare = (runId: string, facts: ReadonlyArray<Fact>) =>
  facts.length === 0
    ? Effect.succeedNone
    : JournalCompanion.prepare(facts.map((f) => toJournalFact(runId, f)))
