/**
 * Text rules shared by identifiers and JSON admission: PostgreSQL cannot store
 * U+0000 or an unpaired surrogate, and SQLite binds a lone surrogate as U+FFFD,
 * so both dialects refuse them at admission and give one answer.
 *
 * @internal
 */

/** The first offending character class of `text`, or `undefined` when it is storable. */
export const textProblem = (text: string): "NUL" | "unpaired surrogate" | undefined => {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit === 0) return "NUL"
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++
        continue
      }
      return "unpaired surrogate"
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) return "unpaired surrogate"
  }
  return undefined
}

/** Largest integer an integer column holds (the migrations' CHECK bound). */
export const maxStoredInt = Number.MAX_SAFE_INTEGER

/** Largest sequence value a row may hold (`Number.MAX_SAFE_INTEGER - 1`). */
export const maxSeq = Number.MAX_SAFE_INTEGER - 1

/** A stored integer as a safe number, accepting a canonical decimal string or bigint from other clients. */
export const toSafeInt = (value: unknown): number | undefined => {
  if (typeof value === "number") return Number.isSafeInteger(value) ? value : undefined
  if (typeof value === "bigint") {
    const n = Number(value)
    return Number.isSafeInteger(n) && BigInt(n) === value ? n : undefined
  }
  if (typeof value === "string" && /^-?(0|[1-9][0-9]{0,15})$/.test(value)) {
    const n = Number(value)
    return Number.isSafeInteger(n) ? n : undefined
  }
  return undefined
}

/** A stored `seq` or `source_seq` in the range the `Seq` type promises (`0..maxSeq`), else `undefined`. */
export const toSeq = (value: unknown): number | undefined => {
  const n = toSafeInt(value)
  return n !== undefined && n >= 0 && n <= maxSeq ? n : undefined
}

/** A stored time or count in the range the columns hold (`0..maxStoredInt`), else `undefined`. */
export const toStoredInt = (value: unknown): number | undefined => {
  const n = toSafeInt(value)
  return n !== undefined && n >= 0 ? n : undefined
}
