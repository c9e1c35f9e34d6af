/**
 * The main job's progress line and summary.
 */
import * as Table from "./cliTable.js"

/** What the progress line shows. */
export interface ProgressState {
  readonly filesDone: number
  readonly filesTotal: number | undefined
  readonly bytesDone: number
  readonly bytesTotal: number | undefined
  readonly rate: number
  readonly owner: string
  readonly takeovers: number
  readonly status: string
}

const blocks = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"]

/** `▕███████▌   ▏` of `width` cells for a fraction 0..1. */
export const bar = (fraction: number, width = 12): string => {
  const f = Math.max(0, Math.min(1, fraction))
  const eighths = Math.round(f * width * 8)
  const full = Math.floor(eighths / 8)
  const partial = blocks[eighths % 8] ?? ""
  const body = "█".repeat(full) + partial
  return `▕${body}${" ".repeat(Math.max(0, width - full - (partial === "" ? 0 : 1)))}▏`
}

/** One progress line. */
export const line = (s: ProgressState): string => {
  const fraction = s.filesTotal === undefined || s.filesTotal === 0 ? 0 : s.filesDone / s.filesTotal
  const files = `${Table.count(s.filesDone)}/${s.filesTotal === undefined ? "?" : Table.count(s.filesTotal)} files`
  const mb = (n: number) => (n / 1e6).toFixed(1)
  const bytes = `${mb(s.bytesDone)}/${s.bytesTotal === undefined ? "?" : mb(s.bytesTotal)} MB`
  return `${bar(fraction)} ${files}  ${bytes}  ${Table.count(s.rate)} files/s  owner ${s.owner}  takeovers ${s.takeovers}`
}

/** Everything the summary reports. */
export interface Summary {
  readonly runId: string
  readonly status: string
  readonly root: string
  readonly files: number
  readonly bytes: number
  readonly missing: number
  readonly unreadable: number
  readonly changed: number
  readonly skipped: number
  readonly batches: number
  readonly durationMs: number
  readonly hashingMs: number | undefined
  readonly filesPerSecond: number | undefined
  readonly stepsCompleted: number
  readonly attempts: number
  readonly workers: ReadonlyArray<string>
  readonly killed: ReadonlyArray<string>
  readonly takeovers: number
  readonly recoveryMs: number | undefined
  readonly resumedFromCheckpoint: number
  readonly error?: string | undefined
  readonly compare?: { readonly plainFilesPerSecond: number; readonly ratio: number | undefined } | undefined
}

/** The human summary table. */
export const summaryTable = (s: Summary): string => {
  const pairs: Array<readonly [string, string]> = [
    ["run", `${s.runId} (${s.status})`],
    ["directory", s.root],
    ["files", `${Table.count(s.files)}${s.skipped > 0 ? ` (${s.skipped} skipped: symlinks, special or unreadable)` : ""}`],
    ["bytes", Table.bytes(s.bytes)],
    ["duration", `${Table.duration(s.durationMs)} total${s.hashingMs === undefined ? "" : `, ${Table.duration(s.hashingMs)} hashing`}`],
    ["rate", s.filesPerSecond === undefined ? "-" : `${Table.count(s.filesPerSecond)} files/s (hashing phase)`],
    ["batches", String(s.batches)],
    ["steps", `${s.stepsCompleted} completed / ${s.attempts} attempts`],
    ["workers", `${s.workers.join(", ")}${s.killed.length === 0 ? "" : `; killed ${s.killed.join(", ")}`}`],
    ["takeovers", `${s.takeovers}${s.recoveryMs === undefined ? "" : ` (recovered ${Table.duration(s.recoveryMs)} after the kill)`}`],
    ["resumed from checkpoint", String(s.resumedFromCheckpoint)]
  ]
  if (s.missing + s.unreadable + s.changed > 0) {
    pairs.push(["problems", `${s.missing} missing, ${s.unreadable} unreadable, ${s.changed} changed while indexed`])
  }
  if (s.compare !== undefined) {
    pairs.push(["plain loop", `${Table.count(s.compare.plainFilesPerSecond)} files/s`])
    if (s.compare.ratio !== undefined) pairs.push(["baton / plain", s.compare.ratio.toFixed(2)])
  }
  if (s.error !== undefined) pairs.push(["error", s.error])
  return Table.keyValues(pairs)
}

/**
 * The hashing phase this coordinator watched: from the end of the walk, or from its own start when it
 * resumed a run walked earlier (`pnpm start -- --resume`), to the last batch completion. `undefined` when
 * no batch completed in that window. Rates use the files hashed in the same window, so hashing time never
 * exceeds the total and the rate is not diluted by an earlier drive's work.
 */
export const hashingWindow = (w: {
  readonly startedAt: number
  readonly walkDoneAt: number | undefined
  readonly lastHashDoneAt: number | undefined
}): { readonly fromMs: number; readonly ms: number } | undefined => {
  if (w.walkDoneAt === undefined || w.lastHashDoneAt === undefined) return undefined
  const fromMs = Math.max(w.walkDoneAt, w.startedAt)
  if (w.lastHashDoneAt <= fromMs) return undefined
  return { fromMs, ms: w.lastHashDoneAt - fromMs }
}
