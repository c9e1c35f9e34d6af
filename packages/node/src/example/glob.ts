/**
 * A small glob matcher for the example indexer: `*` (any run of characters except `/`), `?` (one
 * character except `/`), `**` (any number of whole path segments, including none). Paths are relative,
 * `/`-separated. Kept in-package so the example needs no dependency.
 *
 * @since 0.1.0
 */

/**
 * A compiled pattern.
 *
 * @since 0.1.0
 * @category models
 */
export interface Glob {
  readonly source: string
  readonly matches: (path: string) => boolean
}

/**
 * Why a pattern was refused; the message names the rule.
 *
 * @since 0.1.0
 * @category errors
 */
export class GlobError extends Error {
  readonly _tag = "GlobError"
}

const escapeRegex = (c: string): string => /[\\^$.*+?()[\]{}|]/.test(c) ? `\\${c}` : c

/**
 * Compiles a glob. Fails with `GlobError` for an empty pattern, an absolute pattern, a NUL character,
 * or `**` mixed with other characters inside one segment.
 *
 * @since 0.1.0
 * @category constructors
 */
export const compile = (source: string): Glob => {
  if (source.length === 0) throw new GlobError("pattern: must not be empty")
  if (source.includes("\u0000")) throw new GlobError("pattern: must not contain NUL")
  if (source.startsWith("/")) throw new GlobError("pattern: must be relative to root (no leading /)")
  if (source.length > 1000) throw new GlobError("pattern: must be at most 1000 characters")
  const segments = source.split("/")
  let regex = "^"
  segments.forEach((segment, index) => {
    const last = index === segments.length - 1
    if (segment === "**") {
      // Zero or more whole segments; as the last segment it also matches files directly under here.
      regex += last ? ".*" : "(?:[^/]+/)*"
      return
    }
    if (segment.includes("**")) {
      throw new GlobError(`pattern: "**" must be a whole path segment, got "${segment}"`)
    }
    if (segment.length === 0) throw new GlobError("pattern: empty path segment (double /)")
    for (const c of segment) {
      regex += c === "*" ? "[^/]*" : c === "?" ? "[^/]" : escapeRegex(c)
    }
    if (!last) regex += "/"
  })
  regex += "$"
  const compiled = new RegExp(regex, "u")
  return { source, matches: (path) => compiled.test(path) }
}
