/**
 * Canonical JSON, durable-text checks and sha256 (docs/design/journal.md). Shared by the runtime and the facade.
 */
import { createHash } from "node:crypto"
import { Effect } from "effect"

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** True when `s` has no U+0000 and no unpaired surrogate (both dialects can store it). */
export const isDurableText = (s: string): boolean => !s.includes("\u0000") && !loneSurrogate.test(s)

/** True for durable text of 1..`max` UTF-16 units. */
export const isDurableTextOfLength = (s: unknown, max: number): s is string =>
  typeof s === "string" && s.length >= 1 && s.length <= max && isDurableText(s)

/** Why a value has no canonical JSON form: `<path>: <reason>`. */
export class CanonicalIssue extends Error {
  constructor(readonly path: string, readonly reason: string) {
    super(`${path}: ${reason}`)
  }
}

/** Render a canonicalization failure for `InvalidInput.issue`. */
export const canonicalIssue = (cause: unknown): string =>
  cause instanceof CanonicalIssue ? cause.message : `$: ${cause instanceof Error ? cause.message : String(cause)}`

const keyPath = (path: string, key: string) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`)

const compareUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

const render = (value: unknown, path: string, seen: Set<object>): string => {
  switch (typeof value) {
    case "string":
      if (!isDurableText(value)) throw new CanonicalIssue(path, "string contains U+0000 or an unpaired surrogate")
      return JSON.stringify(value)
    case "number":
      if (!Number.isFinite(value)) throw new CanonicalIssue(path, "number is not finite")
      return JSON.stringify(value)
    case "boolean":
      return value ? "true" : "false"
    case "bigint":
      throw new CanonicalIssue(path, "bigint is not JSON")
    case "function":
      throw new CanonicalIssue(path, "function is not JSON")
    case "symbol":
      throw new CanonicalIssue(path, "symbol is not JSON")
    case "undefined":
      throw new CanonicalIssue(path, "undefined is not JSON")
  }
  if (value === null) return "null"
  const object = value as object
  if (seen.has(object)) throw new CanonicalIssue(path, "cycle")
  seen.add(object)
  try {
    if (Array.isArray(object)) {
      const length = arrayLength(object)
      if (length === undefined) throw new CanonicalIssue(path, "array length is not a non-negative integer")
      const parts: Array<string> = []
      for (let i = 0; i < length; i++) {
        const descriptor = Object.getOwnPropertyDescriptor(object, i)
        if (descriptor !== undefined && !("value" in descriptor)) throw new CanonicalIssue(`${path}[${i}]`, "accessor property")
        parts.push(render(descriptor?.value, `${path}[${i}]`, seen))
      }
      return `[${parts.join(",")}]`
    }
    const proto = Object.getPrototypeOf(object)
    if (proto !== Object.prototype && proto !== null) throw new CanonicalIssue(path, "not a plain object")
    if (Object.getOwnPropertySymbols(object).length > 0) throw new CanonicalIssue(path, "symbol key")
    const keys = Object.keys(object).sort(compareUnits)
    const parts: Array<string> = []
    for (const key of keys) {
      if (!isDurableText(key)) throw new CanonicalIssue(path, "key contains U+0000 or an unpaired surrogate")
      const descriptor = Object.getOwnPropertyDescriptor(object, key)!
      if (!("value" in descriptor)) throw new CanonicalIssue(keyPath(path, key), "accessor property")
      if (descriptor.value === undefined) continue
      parts.push(`${JSON.stringify(key)}:${render(descriptor.value, keyPath(path, key), seen)}`)
    }
    return `{${parts.join(",")}}`
  } finally {
    seen.delete(object)
  }
}

/**
 * The own `length` of an array (or a proxy passing `Array.isArray`; `descriptor` when the caller already
 * read it) when it is a data property holding an array length (an integer in 0..2^32-1); `undefined` otherwise. A proxy can report any length, and a
 * negative or fractional one would otherwise read as an empty array.
 */
export const arrayLength = (
  array: object,
  descriptor: PropertyDescriptor | undefined = Object.getOwnPropertyDescriptor(array, "length")
): number | undefined => {
  if (descriptor === undefined || !("value" in descriptor)) return undefined
  const length: unknown = descriptor.value
  return typeof length === "number" && Number.isInteger(length) && length >= 0 && length <= 2 ** 32 - 1 ? length : undefined
}

/**
 * Canonical JSON of `value`: keys sorted by UTF-16 code units, `undefined` members omitted.
 * Throws a `CanonicalIssue` for anything without a JSON form both dialects can store.
 */
export const canonical = (value: unknown, root = "$"): string => render(value, root, new Set())

/** Canonical JSON, or the issue text. */
export const tryCanonical = (value: unknown, root = "$"): { readonly ok: true; readonly text: string } | {
  readonly ok: false
  readonly issue: string
} => {
  try {
    return { ok: true, text: canonical(value, root) }
  } catch (cause) {
    return { ok: false, issue: canonicalIssue(cause) }
  }
}

const hex = (bytes: ArrayBuffer) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("")

/** Lowercase hex SHA-256 of the UTF-8 bytes of `text`. */
export const sha256 = (text: string): Effect.Effect<string> =>
  Effect.promise(() => globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))).pipe(Effect.map(hex))

/**
 * {@link sha256} hashed in place (as the journal hashes), never yielding: for a batch that digests one card
 * per run, where a round trip to the platform's asynchronous digest per card cost more than the writes.
 */
export const sha256InPlace = (text: string): Effect.Effect<string> =>
  Effect.sync(() => createHash("sha256").update(text, "utf8").digest("hex"))
