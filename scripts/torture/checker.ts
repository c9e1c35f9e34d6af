/**
 * The torture's history checker: a pure function over rows read back from the database.
 *
 * Every fenced write the torture makes lands on the run's own journal stream, whose `seq`
 * orders everything that happened to one run:
 * - `torture.acquired` is appended (fenced) in the same transaction as the activation that made
 *   its owner the owner; its `seq` is that owner's fence token;
 * - `torture.step` is appended (fenced) with the step's application row (`torture_effects`) and
 *   the attempt's `finish` in one transaction;
 * - `torture.completed` is appended (fenced) with `transitionOwned(completed)` in one transaction.
 * The run store's own ownership facts (companion stream) give the activations independently.
 *
 * @since 0.1.0
 */

/** An owner as text: `hostId/pid/nonce`. */
export type OwnerKey = string

export interface RunRow {
  readonly runId: string
  readonly status: string
}

/** A torture entry on a run's own journal stream. */
export interface Entry {
  readonly runId: string
  readonly seq: number
  readonly eventType: "torture.acquired" | "torture.step" | "torture.completed"
  readonly owner: OwnerKey
  /** The writer's fence token (the `seq` of its `torture.acquired`); `null` on `torture.acquired`. */
  readonly fence: number | null
  readonly step: number | null
}

/** An ownership fact of the run store (companion stream), in that stream's order. */
export interface Fact {
  readonly runId: string
  readonly seq: number
  readonly transition: string
  readonly owner: OwnerKey
}

/** A `flows_attempts` row; `owner` from its meta. */
export interface Attempt {
  readonly runId: string
  readonly step: number
  readonly attempt: number
  readonly state: string
  readonly owner: OwnerKey
}

/** A `torture_effects` row: the application's record of a step commit. */
export interface Effect {
  readonly runId: string
  readonly step: number
  readonly owner: OwnerKey
  readonly fence: number
  readonly journalSeq: number
}

export interface History {
  /** The run ids the torture created. */
  readonly expectedRuns: ReadonlyArray<string>
  /** Steps per run (0 … steps − 1). */
  readonly steps: number
  readonly runs: ReadonlyArray<RunRow>
  readonly entries: ReadonlyArray<Entry>
  readonly facts: ReadonlyArray<Fact>
  readonly attempts: ReadonlyArray<Attempt>
  readonly effects: ReadonlyArray<Effect>
}

export type FindingKind =
  /** Two owners' fenced writes interleave on one run (A wrote, B wrote, A wrote again). */
  | "double_owner"
  /** A fenced write landed after a later owner's activation. */
  | "deposed_write"
  /** A write's fence token is not an activation of its writer. */
  | "bad_fence"
  /** The activations on the run stream differ from the run store's `activated` facts. */
  | "ownership_mismatch"
  /** The run is not completed (or missing, or has no completion entry). */
  | "not_terminal"
  /** More than one completion landed. */
  | "terminal_twice"
  /** A step has more than one application row or step entry. */
  | "step_doubled"
  /** A completed run misses a step's application row or step entry. */
  | "step_lost"
  /** An application row and the step entries disagree (no entry at its seq, other owner or fence). */
  | "step_mismatch"
  /** A committed step has no single succeeded attempt of its writer. */
  | "attempt_mismatch"

export interface Finding {
  readonly kind: FindingKind
  readonly runId: string
  readonly detail: string
}

export interface Report {
  readonly runs: number
  readonly completed: number
  readonly activations: number
  readonly steals: number
  readonly recoveries: number
  readonly stepCommits: number
  readonly attempts: number
  readonly violations: number
  readonly findings: ReadonlyArray<Finding>
}

const groupBy = <A>(rows: ReadonlyArray<A>, key: (a: A) => string): Map<string, Array<A>> => {
  const map = new Map<string, Array<A>>()
  for (const row of rows) {
    const k = key(row)
    const list = map.get(k)
    if (list === undefined) map.set(k, [row])
    else list.push(row)
  }
  return map
}

const checkRun = (
  runId: string,
  history: History,
  row: RunRow | undefined,
  entries: ReadonlyArray<Entry>,
  facts: ReadonlyArray<Fact>,
  attempts: ReadonlyArray<Attempt>,
  effects: ReadonlyArray<Effect>
): Array<Finding> => {
  const findings: Array<Finding> = []
  const find = (kind: FindingKind, detail: string) => findings.push({ kind, runId, detail })
  const ordered = [...entries].sort((a, b) => a.seq - b.seq)
  const acquisitions = ordered.filter((e) => e.eventType === "torture.acquired")
  const acquiredAt = new Map(acquisitions.map((e) => [e.seq, e]))

  // Ownership: the activations the run store recorded, in order, are the ones the torture marked.
  const activated = [...facts].sort((a, b) => a.seq - b.seq).filter((f) => f.transition === "activated")
  const marked = acquisitions.map((e) => e.owner)
  if (activated.length !== marked.length || activated.some((f, i) => f.owner !== marked[i])) {
    find(
      "ownership_mismatch",
      `activated facts [${activated.map((f) => f.owner).join(", ")}] vs acquired entries [${marked.join(", ")}]`
    )
  }

  // Fences: each write names its writer's activation, and lands before the next owner's.
  let current: Entry | undefined
  const writes: Array<Entry> = []
  for (const e of ordered) {
    if (e.eventType === "torture.acquired") {
      current = e
      continue
    }
    writes.push(e)
    const token = e.fence === null ? undefined : acquiredAt.get(e.fence)
    if (token === undefined || token.owner !== e.owner) {
      find("bad_fence", `${e.eventType} at seq ${e.seq} by ${e.owner} names fence ${e.fence}, not an activation of it`)
    } else if (current !== undefined && current.seq !== e.fence) {
      find(
        "deposed_write",
        `${e.eventType}${e.step === null ? "" : ` step ${e.step}`} at seq ${e.seq} by ${e.owner} (fence ${e.fence}) ` +
          `landed after ${current.owner} was activated at seq ${current.seq}`
      )
    }
  }

  // Overlap: one owner's writes must not straddle another's.
  const spans = new Map<OwnerKey, { first: number; last: number }>()
  for (const w of writes) {
    const span = spans.get(w.owner)
    if (span === undefined) spans.set(w.owner, { first: w.seq, last: w.seq })
    else span.last = w.seq
  }
  const owners = [...spans.entries()]
  for (let i = 0; i < owners.length; i++) {
    for (let j = i + 1; j < owners.length; j++) {
      const [a, sa] = owners[i]!
      const [b, sb] = owners[j]!
      if (sa.first < sb.last && sb.first < sa.last) {
        find("double_owner", `${a} wrote at seq ${sa.first}..${sa.last} and ${b} at seq ${sb.first}..${sb.last}`)
      }
    }
  }

  // Terminal exactly once.
  const completions = ordered.filter((e) => e.eventType === "torture.completed")
  if (completions.length > 1) {
    find("terminal_twice", `completed ${completions.length} times: ${completions.map((c) => `seq ${c.seq} by ${c.owner}`).join(", ")}`)
  }
  if (row === undefined) find("not_terminal", "the run row is missing")
  else if (row.status !== "completed") find("not_terminal", `status ${row.status}`)
  else if (completions.length === 0) find("not_terminal", "completed without a completion entry")

  // Steps: one application row and one step entry each, agreeing; one succeeded attempt by the writer.
  const stepEntries = groupBy(ordered.filter((e) => e.eventType === "torture.step"), (e) => String(e.step))
  const effectsByStep = groupBy(effects, (e) => String(e.step))
  const entryAt = new Map(ordered.map((e) => [e.seq, e]))
  for (const effect of effects) {
    const entry = entryAt.get(effect.journalSeq)
    if (
      entry === undefined || entry.eventType !== "torture.step" || entry.step !== effect.step ||
      entry.owner !== effect.owner || entry.fence !== effect.fence
    ) {
      find("step_mismatch", `application row of step ${effect.step} by ${effect.owner} (fence ${effect.fence}) has no matching step entry at seq ${effect.journalSeq}`)
    }
  }
  const completed = row?.status === "completed"
  for (let step = 0; step < history.steps; step++) {
    const rows = effectsByStep.get(String(step)) ?? []
    const stepped = stepEntries.get(String(step)) ?? []
    if (rows.length > 1 || stepped.length > 1) {
      find(
        "step_doubled",
        `step ${step}: ${rows.length} application rows (${rows.map((r) => `${r.owner} fence ${r.fence}`).join(", ")}), ` +
          `${stepped.length} step entries`
      )
    }
    if (completed && (rows.length === 0 || stepped.length === 0)) {
      find("step_lost", `step ${step}: ${rows.length} application rows, ${stepped.length} step entries in a completed run`)
    }
    for (const r of rows) {
      const succeeded = attempts.filter((a) => a.step === step && a.state === "succeeded")
      if (succeeded.length !== rows.length || !succeeded.some((a) => a.owner === r.owner)) {
        find("attempt_mismatch", `step ${step}: ${succeeded.length} succeeded attempts for the row by ${r.owner}`)
      }
    }
  }
  for (const r of effects) {
    if (!Number.isInteger(r.step) || r.step < 0 || r.step >= history.steps) {
      find("step_mismatch", `application row of step ${r.step} outside 0..${history.steps - 1}`)
    }
  }
  return findings
}

/**
 * Checks a torture history: every finding is a violation (see {@link FindingKind}).
 *
 * @since 0.1.0
 */
export const check = (history: History): Report => {
  const runs = new Map(history.runs.map((r) => [r.runId, r]))
  const entries = groupBy(history.entries, (e) => e.runId)
  const facts = groupBy(history.facts, (f) => f.runId)
  const attempts = groupBy(history.attempts, (a) => a.runId)
  const effects = groupBy(history.effects, (e) => e.runId)
  const findings: Array<Finding> = []
  for (const runId of history.expectedRuns) {
    findings.push(
      ...checkRun(
        runId,
        history,
        runs.get(runId),
        entries.get(runId) ?? [],
        facts.get(runId) ?? [],
        attempts.get(runId) ?? [],
        effects.get(runId) ?? []
      )
    )
  }
  return {
    runs: history.expectedRuns.length,
    completed: history.expectedRuns.filter((id) => runs.get(id)?.status === "completed").length,
    activations: history.facts.filter((f) => f.transition === "activated").length,
    steals: history.facts.filter((f) => f.transition === "stolen").length,
    recoveries: history.facts.filter((f) => f.transition === "expired").length,
    stepCommits: history.effects.length,
    attempts: history.attempts.length,
    violations: findings.length,
    findings
  }
}
