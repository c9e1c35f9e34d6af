/**
 * In-process producer state: the identity cache (committed identities, oldest
 * evicted first; queued lossy identities, never evicted while pending) and the
 * per-`(runId, sourceId)` sourceSeq floors. It only accelerates: a miss changes
 * the receipt a lossy emit returns, never what is stored.
 *
 * @internal
 */

export type Cached =
  | { readonly status: "pending"; readonly contentKey: string }
  | { readonly status: "committed"; readonly seq: number; readonly contentKey: string }

const pairKey = (runId: string, sourceId: string): string => `${runId.length}:${runId}:${sourceId}`

export const makeIdentityCache = (bound: number) => {
  const committed = new Map<string, { readonly seq: number; readonly contentKey: string }>()
  const pending = new Map<string, { readonly contentKey: string }>()
  const floors = new Map<string, number>()
  // Explicit sourceSeqs seen for pairs whose floor is unknown (never read from the database): an
  // allocation must still stay above them, or it would reuse an identity still queued on the lossy channel.
  const hints = new Map<string, number>()
  const pendingPerPair = new Map<string, number>()
  const floorBound = bound * 4

  const get = (eventId: string): Cached | undefined => {
    const queued = pending.get(eventId)
    if (queued !== undefined) return { status: "pending", contentKey: queued.contentKey }
    const done = committed.get(eventId)
    return done === undefined ? undefined : { status: "committed", seq: done.seq, contentKey: done.contentKey }
  }

  const commit = (eventId: string, seq: number, contentKey: string): void => {
    committed.delete(eventId)
    committed.set(eventId, { seq, contentKey })
    while (committed.size > bound) {
      const oldest = committed.keys().next()
      if (oldest.done === true) break
      committed.delete(oldest.value)
    }
  }

  const addPending = (eventId: string, runId: string, sourceId: string, contentKey: string): void => {
    pending.set(eventId, { contentKey })
    const key = pairKey(runId, sourceId)
    pendingPerPair.set(key, (pendingPerPair.get(key) ?? 0) + 1)
  }

  /** The queued identity left the queue (committed, collapsed, lost or evicted). */
  const settlePending = (eventId: string, runId: string, sourceId: string): void => {
    if (!pending.delete(eventId)) return
    const key = pairKey(runId, sourceId)
    const count = (pendingPerPair.get(key) ?? 1) - 1
    if (count <= 0) pendingPerPair.delete(key)
    else pendingPerPair.set(key, count)
  }

  const floor = (runId: string, sourceId: string): number | undefined => floors.get(pairKey(runId, sourceId))

  /** The lowest next sourceSeq explicit emits imply for a pair whose floor is unknown (0 when none). */
  const hint = (runId: string, sourceId: string): number => hints.get(pairKey(runId, sourceId)) ?? 0

  /** Forget the oldest entries of `map` above `floorBound`, keeping pairs with queued entries and `keep`. */
  const trim = (map: Map<string, number>, keep: string): void => {
    if (map.size <= floorBound) return
    for (const candidate of map.keys()) {
      if (map.size <= floorBound) break
      if (candidate !== keep && !pendingPerPair.has(candidate)) map.delete(candidate)
    }
  }

  /**
   * Raise the pair's floor to at least `next`; floors only rise. `onlyIfKnown`:
   * an explicit sourceSeq raises a floor already read from the database but
   * never creates one (the stored maximum may be higher).
   */
  const raiseFloor = (runId: string, sourceId: string, next: number, onlyIfKnown: boolean): void => {
    const key = pairKey(runId, sourceId)
    const current = floors.get(key)
    if (current === undefined && onlyIfKnown) {
      const previous = hints.get(key) ?? 0
      if (previous >= next) return
      hints.delete(key)
      hints.set(key, next)
      trim(hints, key)
      return
    }
    const target = Math.max(next, hints.get(key) ?? 0)
    hints.delete(key)
    if (current !== undefined && current >= target) return
    floors.delete(key)
    floors.set(key, target)
    // Forget the oldest pairs with nothing queued: a forgotten floor is re-read from the database.
    trim(floors, key)
  }

  // The head each run had after this process's last committed durable append to it. Heads only
  // rise, so a head that still reads so means no one appended since, and this process's floors
  // are the run's.
  const heads = new Map<string, number>()

  /** The head this process left on `runId` at its last committed append, if remembered. */
  const head = (runId: string): number | undefined => heads.get(runId)

  /** Remember `next` as the head this process's committed append left on `runId`. */
  const noteHead = (runId: string, next: number): void => {
    heads.delete(runId)
    heads.set(runId, next)
    trim(heads, runId)
  }

  return { get, commit, addPending, settlePending, floor, hint, raiseFloor, head, noteHead } as const
}

export type IdentityCache = ReturnType<typeof makeIdentityCache>
