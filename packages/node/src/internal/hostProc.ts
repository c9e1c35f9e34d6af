/**
 * Reads of a `/proc`-shaped directory. Every function answers `undefined` when the
 * entry is missing or unreadable, so callers decide what "unknown" means.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** `/proc` on Linux; tests pass a directory shaped like it. */
export const defaultProcRoot = "/proc"

const readText = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

/** The trimmed boot id (`sys/kernel/random/boot_id`). */
export const bootId = (procRoot: string): string | undefined => {
  const text = readText(path.join(procRoot, "sys", "kernel", "random", "boot_id"))?.trim().toLowerCase()
  return text !== undefined && /^[0-9a-f-]{1,64}$/.test(text) ? text : undefined
}

/**
 * The inode digits of the pid namespace link (`self/ns/pid` → `pid:[4026531836]`). A fake
 * procRoot may hold a regular file with the link's text instead of a symlink.
 */
export const pidNamespace = (procRoot: string): string | undefined => {
  const file = path.join(procRoot, "self", "ns", "pid")
  let target: string | undefined
  try {
    target = fs.readlinkSync(file)
  } catch {
    target = readText(file)
  }
  const match = target === undefined ? null : /\[(\d+)\]/.exec(target)
  return match?.[1]
}

/** The fields of a `<pid>/stat` line this package uses. */
export interface Stat {
  readonly state: string
  readonly startTicks: number
}

/**
 * Parse a stat line after the last `)`: the command name may hold spaces and parentheses.
 * Fields after it start at field 3 (state); start ticks are field 22.
 */
export const parseStat = (line: string): Stat | undefined => {
  const close = line.lastIndexOf(")")
  if (close < 0) return undefined
  const fields = line.slice(close + 1).trim().split(/\s+/)
  const state = fields[0]
  const ticks = Number(fields[19])
  if (state === undefined || state.length === 0 || !Number.isSafeInteger(ticks) || ticks < 0) return undefined
  return { state, startTicks: ticks }
}

/** `<pid>/stat` (or `self/stat`) parsed, `undefined` when unreadable or malformed. */
export const stat = (procRoot: string, pid: number | "self"): Stat | undefined => {
  const text = readText(path.join(procRoot, String(pid), "stat"))
  return text === undefined ? undefined : parseStat(text)
}

/** Boot time in epoch seconds: the `btime` line of `stat`. */
export const bootTimeSeconds = (procRoot: string): number | undefined => {
  const text = readText(path.join(procRoot, "stat"))
  const match = text === undefined ? null : /^btime\s+(\d+)\s*$/m.exec(text)
  const value = match?.[1] === undefined ? NaN : Number(match[1])
  return Number.isSafeInteger(value) ? value : undefined
}
