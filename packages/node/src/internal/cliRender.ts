/**
 * Pure renderers for the CLI's human output: aligned tables and summaries built from
 * control's shapes. JSON output uses the shapes themselves and does not pass through here.
 */
import type * as ControlSchema from "@baton/control/ControlSchema"
import * as Table from "./cliTable.js"

/** Stale-after of a lease in ms (the lease constant S). */
export const staleAfterMs = 30_000

/** The owner fence a summary carries (`ownerId` is its JSON), or undefined. */
export const parseOwner = (
  ownerJson: string | undefined
): { readonly hostId: string; readonly pid: number; readonly nonce?: string } | undefined => {
  if (ownerJson === undefined) return undefined
  try {
    const parsed = JSON.parse(ownerJson) as unknown
    if (typeof parsed === "object" && parsed !== null && "hostId" in parsed && "pid" in parsed) {
      const { hostId, pid, nonce } = parsed as { hostId: unknown; pid: unknown; nonce?: unknown }
      if (typeof hostId === "string" && typeof pid === "number") {
        return typeof nonce === "string" ? { hostId, pid, nonce } : { hostId, pid }
      }
    }
  } catch {
    // not JSON: shown verbatim below
  }
  return undefined
}

/** `host:pid`; the host id's first segment only (the boot id makes it long). */
export const hostPid = (owner: { readonly hostId: string; readonly pid: number }): string =>
  `${owner.hostId.split("/")[0] ?? owner.hostId}:${owner.pid}`

/** OWNER cell: `host:pid`, `host:pid (stale 42 s)` past S, empty when unowned. */
export const ownerCell = (summary: ControlSchema.RunSummary, heartbeatAtMs: number | null | undefined, nowMs: number): string => {
  const owner = parseOwner(summary.ownerId)
  if (owner === undefined) return summary.ownerId === undefined ? "" : summary.ownerId
  const base = hostPid(owner)
  if (heartbeatAtMs !== null && heartbeatAtMs !== undefined && nowMs - heartbeatAtMs > staleAfterMs) {
    return `${base} (stale ${Math.round((nowMs - heartbeatAtMs) / 1000)} s)`
  }
  return base
}

/** WAITING cell: `reason:name` of the first open wait, else the waiting reason. */
export const waitingCell = (summary: ControlSchema.RunSummary): string => {
  const wait = summary.pendingWaits?.[0]
  if (wait !== undefined) return wait.name === undefined ? wait.reason : `${wait.reason}:${wait.name}`
  return summary.waitingReason ?? ""
}

const when = (ms: number, nowMs: number, tty: boolean): string => (tty ? Table.ago(ms, nowMs) : Table.timestamp(ms))

/** The `baton runs` table. */
export const runsTable = (
  items: ReadonlyArray<ControlSchema.RunSummary>,
  heartbeats: ReadonlyMap<string, number | null>,
  nowMs: number,
  tty: boolean
): string =>
  Table.table(
    ["RUN", "FLOW", "STATUS", "OWNER", "CREATED", "UPDATED", "WAITING"],
    items.map((s) => [
      s.runId,
      s.flowId,
      s.status,
      ownerCell(s, heartbeats.get(s.runId), nowMs),
      when(s.createdAt, nowMs, tty),
      when(s.updatedAt, nowMs, tty),
      waitingCell(s)
    ])
  )

/** The `baton plans` table. */
export const plansTable = (
  items: ReadonlyArray<
    | { readonly card: ControlSchema.PlanCard; readonly input: unknown; readonly decision: string }
    | { readonly planId: string; readonly decision?: string | undefined; readonly readable: false; readonly issue: string }
  >
): string =>
  Table.table(
    ["PLAN", "FLOW", "DECISION", "DIGEST", "INPUT"],
    // An unreadable plan is shown in place, marked: flow `?`, the decision its row stores.
    items.map((p) =>
      "readable" in p
        ? [p.planId, "?", `${p.decision ?? "?"} (unreadable)`, "?", "?"]
        : [p.card.planId, p.card.flowId, p.decision, p.card.digest.slice(0, 12), Table.truncate(JSON.stringify(p.input), 60)]
    )
  )

/** A plan card for `baton plan`. */
export const planCard = (card: ControlSchema.PlanCard, decision?: string): string =>
  Table.keyValues([
    ["plan", card.planId],
    ["flow", card.flowId],
    ["digest", card.digest],
    ["input", card.inputSummary],
    ["capabilities", card.envelope.capabilities.join(", ") || "(none)"],
    ...(card.executionDigest === undefined ? [] : [["code", card.executionDigest] as const]),
    ...(decision === undefined ? [] : [["decision", decision] as const])
  ])

/** One attempt as the CLI reads it (a subset of the run store's `Attempt`). */
export interface AttemptView {
  readonly stepKeyDigest: string
  readonly attempt: number
  readonly state: string
  readonly startedAtMs: number
  readonly finishedAtMs?: number | undefined
  readonly checkpoint?: unknown
  readonly error?: unknown
  readonly outcome?: unknown
  readonly meta: unknown
}

/** The step name recorded in an attempt's meta, else its digest prefix. */
export const stepNameOf = (attempt: AttemptView): string => {
  const meta = attempt.meta
  if (typeof meta === "object" && meta !== null && "name" in meta && typeof (meta as { name: unknown }).name === "string") {
    return (meta as { name: string }).name
  }
  return attempt.stepKeyDigest.slice(0, 12)
}

const errorText = (error: unknown): string => {
  if (error === undefined || error === null) return ""
  if (typeof error === "object" && "message" in error && typeof (error as { message: unknown }).message === "string") {
    return (error as { message: string }).message
  }
  return JSON.stringify(error)
}

/** Attempts in start order; `$result` last. */
export const sortAttempts = (attempts: ReadonlyArray<AttemptView>): ReadonlyArray<AttemptView> =>
  [...attempts].sort((a, b) => a.startedAtMs - b.startedAtMs || a.attempt - b.attempt)

/** The attempts table of `baton run`. */
export const attemptsTable = (attempts: ReadonlyArray<AttemptView>, nowMs: number): string =>
  Table.table(
    ["STEP", "ATTEMPT", "STATE", "STARTED", "DURATION", "CHECKPOINT", "ERROR"],
    sortAttempts(attempts).map((a) => [
      stepNameOf(a),
      String(a.attempt),
      a.state,
      Table.timestamp(a.startedAtMs),
      a.finishedAtMs === undefined ? (a.state === "running" ? Table.duration(nowMs - a.startedAtMs) + "…" : "") : Table.duration(a.finishedAtMs - a.startedAtMs),
      a.checkpoint === undefined ? "" : Table.bytes(Buffer.byteLength(JSON.stringify(a.checkpoint))),
      Table.truncate(errorText(a.error), 60)
    ])
  )

/** One journal entry as the CLI shows it. */
export interface EntryView {
  readonly seq: number
  readonly emittedAtMs: number
  readonly eventType: string
  readonly payload: unknown
  readonly ownership?: boolean | undefined
}

/** The journal table (`~` marks ownership facts from the companion stream). */
export const journalTable = (entries: ReadonlyArray<EntryView>, width = 100): string =>
  Table.table(
    ["SEQ", "TIME", "TYPE", "PAYLOAD"],
    entries.map((e) => [
      e.ownership === true ? `~${e.seq}` : String(e.seq),
      Table.timestamp(e.emittedAtMs),
      e.eventType,
      Table.truncate(JSON.stringify(e.payload), width)
    ])
  )

/** One line of `journal --follow` for people. */
export const journalLine = (e: EntryView): string =>
  `${e.ownership === true ? "~" : ""}${e.seq}  ${Table.timestamp(e.emittedAtMs)}  ${e.eventType}  ${JSON.stringify(e.payload)}`

/** The summary block of `baton run`. */
export const runSummary = (
  s: ControlSchema.RunSummary,
  extra: {
    readonly heartbeatAtMs: number | null | undefined
    readonly nowMs: number
    /** When the pending resume was requested (epoch ms), if the delegation records it. */
    readonly resumeRequestedAtMs?: number | undefined
    readonly result?: { readonly state: string; readonly value?: unknown; readonly error?: unknown } | undefined
  }
): string => {
  const owner = ownerCell(s, extra.heartbeatAtMs, extra.nowMs)
  const lease = extra.heartbeatAtMs === null || extra.heartbeatAtMs === undefined || s.ownerId === undefined
    ? ""
    : ` (heartbeat ${Math.round((extra.nowMs - extra.heartbeatAtMs) / 1000)} s ago)`
  const pairs: Array<readonly [string, string]> = [
    ["run", s.runId],
    ["flow", s.flowId],
    ["status", s.status],
    ...(s.planId === undefined ? [] : [["plan", `${s.planId}${s.planDigest === undefined ? "" : ` (${s.planDigest.slice(0, 12)})`}`] as const]),
    ["owner", owner === "" ? "(none)" : owner + lease],
    ["created", Table.timestamp(s.createdAt)],
    ["updated", Table.timestamp(s.updatedAt)]
  ]
  if (s.queue !== undefined) {
    const attempt = s.attempt === undefined ? "" : `, attempt ${s.attempt}${s.maxAttempts === undefined ? "" : ` of ${s.maxAttempts}`}`
    // Only a delayed or retried run names its availability (a plain start is available when created).
    const available = s.availableAt === undefined || s.availableAt <= s.createdAt
      ? ""
      : `, available ${Table.timestamp(s.availableAt)}`
    pairs.push(["queue", `${s.queue} (priority ${s.priority ?? 0}${attempt}${available})`])
  }
  if (s.parentRunId !== undefined) pairs.push(["parent", s.parentRunId])
  if (s.lineageId !== undefined) pairs.push(["lineage", s.lineageId])
  if (s.roundOrdinal !== undefined) pairs.push(["round", String(s.roundOrdinal)])
  if (s.launchedBy !== undefined) pairs.push(["launched by", `${s.launchedBy.kind}:${s.launchedBy.id}`])
  if (s.cancellation !== undefined) {
    const c = s.cancellation
    pairs.push([
      "cancellation",
      `${c.source}${c.principal === undefined ? "" : ` by ${c.principal.id}`}${c.reason === undefined ? "" : ` (${c.reason})`} at ${Table.timestamp(c.requestedAt)}`
    ])
  }
  if (s.codeDrift !== undefined) {
    const d = s.codeDrift
    const parts = [
      ...(d.recorded === undefined ? [] : [`recorded ${d.recorded}; this build ${d.current ?? "(none)"}`]),
      ...(d.recordedEngine === undefined ? [] : [`engine recorded ${d.recordedEngine}; this build ${d.currentEngine ?? "?"}`])
    ]
    pairs.push(["code drift", parts.join("; ")])
  }
  // `pendingResume` is the request's sequence number, not a time: the time comes from the delegation.
  if (s.pendingResume !== undefined) {
    pairs.push([
      "pending resume",
      extra.resumeRequestedAtMs === undefined
        ? `request sequence ${s.pendingResume}`
        : `requested ${Table.timestamp(extra.resumeRequestedAtMs)} (request sequence ${s.pendingResume})`
    ])
  }
  if (extra.result !== undefined) {
    if (extra.result.state === "completed") {
      pairs.push(["result", "value" in extra.result ? Table.truncate(JSON.stringify(extra.result.value), 400) : "(none)"])
    }
    else pairs.push(["error", Table.truncate(errorText(extra.result.error), 400)])
  }
  return Table.keyValues(pairs)
}

/**
 * The open waits block of `baton run`. `PendingWait.createdAt` is the waiting run's creation time
 * (control records no wait-open time), hence the column name.
 */
export const waitsTable = (waits: ReadonlyArray<ControlSchema.PendingWait>): string =>
  Table.table(
    ["REASON", "NAME", "RUN", "RUN CREATED", "REQUEST"],
    waits.map((w) => [
      w.reason,
      w.name ?? "",
      w.runId,
      Table.timestamp(w.createdAt),
      w.request === undefined ? "" : Table.truncate(JSON.stringify(w.request), 60)
    ])
  )

/**
 * `text` as one POSIX shell word: bare when it holds only safe characters, else single-quoted (a `'`
 * inside becomes `'\''`), so a printed `--cursor …` line can be pasted into a shell as is.
 */
export const shellQuote = (text: string): string =>
  /^[A-Za-z0-9_@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`
