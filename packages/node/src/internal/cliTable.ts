/**
 * Aligned text tables and small value formatters shared by the CLI and the example's summary.
 *
 * @since 0.1.0
 */

/**
 * Renders rows under a header with columns padded to their widest cell, two spaces apart. Trailing
 * spaces are trimmed. Widths count UTF-16 units.
 */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("  ").trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

/** Key/value lines with keys padded to the widest: `status   completed`. */
export const keyValues = (pairs: ReadonlyArray<readonly [string, string]>): string => {
  const width = Math.max(0, ...pairs.map(([k]) => k.length))
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join("\n")
}

/** `1,234` */
export const count = (n: number): string => Math.round(n).toLocaleString("en-US")

/** `20.0 MB` (decimal units, as people read file sizes). */
export const bytes = (n: number): string => {
  if (n < 1000) return `${n} B`
  const units = ["kB", "MB", "GB", "TB"]
  let value = n / 1000
  let unit = 0
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000
    unit++
  }
  return `${value.toFixed(1)} ${units[unit]}`
}

/** `850 ms`, `12.3 s`, `4 min 05 s`. */
export const duration = (ms: number): string => {
  if (ms < 1000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`
  const minutes = Math.floor(ms / 60_000)
  const seconds = Math.round((ms % 60_000) / 1000)
  return `${minutes} min ${String(seconds).padStart(2, "0")} s`
}

/** ISO 8601 in UTC, to the second: `2026-11-30T11:07:14Z`. */
export const timestamp = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z")

/** `42 s ago`, `5 min ago`, `3 h ago`, `2 d ago` relative to `nowMs`. */
export const ago = (ms: number, nowMs: number): string => {
  const delta = Math.max(0, nowMs - ms)
  if (delta < 60_000) return `${Math.round(delta / 1000)} s ago`
  if (delta < 3_600_000) return `${Math.round(delta / 60_000)} min ago`
  if (delta < 86_400_000) return `${Math.round(delta / 3_600_000)} h ago`
  return `${Math.round(delta / 86_400_000)} d ago`
}

/** Cuts `text` to `max` characters with a trailing `…`. */
export const truncate = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`
