/**
 * Input boundary: durable text, integers, JSON admission and inert records.
 *
 * Everything here is synchronous and total: a refusal is a `Refusal` value
 * naming the field and the rule, never the rejected text, and an exception
 * thrown by a hostile input (a Proxy trap, a getter) is itself a refusal.
 */

/** Longest admitted identifier, in UTF-16 code units. */
export const maximumIdentifierLength = 1024
/** Deepest admitted JSON value (the root is depth 0). */
export const maximumJsonDepth = 128
/** Most JSON values (and, separately, array elements plus object entries) in one document. */
export const maximumJsonNodes = 100_000

/** Why an input was refused: the field path and a sentence naming the rule. */
export interface Refusal {
  readonly _tag: "Refusal"
  readonly field: string
  readonly detail: string
}

/** A refusal, or the admitted (copied, frozen where it matters) value. */
export type Admitted<A> = { readonly _tag: "Ok"; readonly value: A } | Refusal

export const ok = <A>(value: A): Admitted<A> => ({ _tag: "Ok", value })
export const refuse = (field: string, detail: string): Refusal => ({ _tag: "Refusal", field, detail })
export const isRefusal = <A>(a: Admitted<A>): a is Refusal => a._tag === "Refusal"

/** True when `text` holds U+0000 or a surrogate that is not part of a pair. */
export const hasIllFormedText = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0) return true
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++
        continue
      }
      return true
    }
    if (c >= 0xdc00 && c <= 0xdfff) return true
  }
  return false
}

/** Durable text: a string of 1..1024 UTF-16 units with no U+0000 and no lone surrogate. */
export const durableText = (field: string, value: unknown): Admitted<string> => {
  if (typeof value !== "string") return refuse(field, `${field} must be a string`)
  if (value.length === 0 || value.length > maximumIdentifierLength) {
    return refuse(field, `${field} must be 1..${maximumIdentifierLength} characters long`)
  }
  if (hasIllFormedText(value)) {
    return refuse(field, `${field} must not contain U+0000 or an unpaired surrogate`)
  }
  return ok(value)
}

/**
 * Decodes a stored integer column: a safe non-negative number, an in-range
 * `bigint`, or a canonical decimal string (a client without a BIGINT parser);
 * `null` stays `null`; anything else is `undefined`.
 */
export const storedInteger = (value: unknown): number | null | undefined => {
  if (value === null) return null
  if (typeof value === "number") return Number.isSafeInteger(value) && value >= 0 ? value : undefined
  if (typeof value === "bigint") {
    return value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : undefined
  }
  if (typeof value === "string" && /^(0|[1-9][0-9]{0,15})$/.test(value)) {
    const n = Number(value)
    return Number.isSafeInteger(n) ? n : undefined
  }
  return undefined
}

/** A safe integer >= 0 (timestamps, pids, ordinals). */
export const safeNonNegative = (field: string, value: unknown): Admitted<number> =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0
    ? ok(value)
    : refuse(field, `${field} must be a non-negative safe integer`)

const isPlainPrototype = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * Reads an inert record: a non-null object whose prototype is `Object.prototype`
 * or `null`, whose enumerable own keys are data properties. `exact` refuses any
 * enumerable key outside `allowed`; otherwise extra keys are ignored. Returns a
 * null-prototype snapshot of the allowed keys that are present. Accessors are
 * never invoked.
 */
export const record = (
  field: string,
  value: unknown,
  allowed: ReadonlyArray<string>,
  exact: boolean
): Admitted<Readonly<Record<string, unknown>>> => {
  try {
    if (typeof value !== "object" || value === null || Array.isArray(value) || !isPlainPrototype(value)) {
      return refuse(field, `${field} must be a plain record`)
    }
    const out: Record<string, unknown> = Object.create(null)
    for (const key of Reflect.ownKeys(value)) {
      const descriptor = Reflect.getOwnPropertyDescriptor(value, key)
      if (descriptor === undefined || !descriptor.enumerable) continue
      if (!("value" in descriptor)) return refuse(field, `${field} must not have accessor properties`)
      if (typeof key === "symbol" || !allowed.includes(key)) {
        if (exact) return refuse(field, `${field} has an unexpected key`)
        continue
      }
      out[key] = descriptor.value
    }
    return ok(out)
  } catch {
    return refuse(field, `${field} could not be inspected`)
  }
}

interface Budget {
  nodes: number
  members: number
}

const budgetRefusal = (field: string, budget: Budget): Refusal | undefined => {
  if (budget.nodes > maximumJsonNodes) return refuse(field, `${field} contains more than ${maximumJsonNodes} JSON values`)
  if (budget.members > maximumJsonNodes) {
    return refuse(field, `${field} contains more than ${maximumJsonNodes} JSON members`)
  }
  return undefined
}

/** Validates a tree produced by `JSON.parse`: depth, counts, finite numbers, well-formed strings. */
const checkParsed = (field: string, value: unknown, depth: number, budget: Budget): Refusal | undefined => {
  budget.nodes++
  if (budget.nodes > maximumJsonNodes) return budgetRefusal(field, budget)
  if (depth > maximumJsonDepth) return refuse(field, `${field} exceeds the maximum JSON depth of ${maximumJsonDepth}`)
  switch (typeof value) {
    case "number":
      return Number.isFinite(value) ? undefined : refuse(field, `${field} contains a non-finite number`)
    case "string":
      return hasIllFormedText(value)
        ? refuse(field, `${field} contains U+0000 or an unpaired surrogate`)
        : undefined
    case "boolean":
      return undefined
    case "object": {
      if (value === null) return undefined
      if (Array.isArray(value)) {
        budget.members += value.length
        const over = budgetRefusal(field, budget)
        if (over) return over
        for (const item of value) {
          const bad = checkParsed(field, item, depth + 1, budget)
          if (bad) return bad
        }
        return undefined
      }
      const keys = Object.keys(value)
      budget.members += keys.length
      const over = budgetRefusal(field, budget)
      if (over) return over
      for (const key of keys) {
        if (hasIllFormedText(key)) return refuse(field, `${field} has a key with U+0000 or an unpaired surrogate`)
        const bad = checkParsed(field, (value as Record<string, unknown>)[key], depth + 1, budget)
        if (bad) return bad
      }
      return undefined
    }
    default:
      return refuse(field, `${field} must be valid JSON text`)
  }
}

/**
 * Run-state admission: a non-empty string that `JSON.parse` accepts, within
 * the depth and size limits, with finite numbers and well-formed strings.
 * The original text is what gets stored.
 */
export const jsonText = (field: string, value: unknown): Admitted<string> => {
  if (typeof value !== "string" || value.length === 0) return refuse(field, `${field} must be valid JSON text`)
  if (hasIllFormedText(value)) return refuse(field, `${field} contains U+0000 or an unpaired surrogate`)
  let parsed: unknown
  try {
    parsed = JSON.parse(value)
  } catch {
    return refuse(field, `${field} must be valid JSON text`)
  }
  const bad = checkParsed(field, parsed, 0, { nodes: 0, members: 0 })
  return bad ?? ok(value)
}

/** Copy of a JS value that is safe to stringify, or a refusal. */
const copyValue = (
  field: string,
  value: unknown,
  depth: number,
  budget: Budget,
  ancestors: Set<object>
): Admitted<unknown> => {
  budget.nodes++
  if (budget.nodes > maximumJsonNodes) return budgetRefusal(field, budget)!
  if (depth > maximumJsonDepth) return refuse(field, `${field} exceeds the maximum JSON depth of ${maximumJsonDepth}`)
  switch (typeof value) {
    case "number":
      return Number.isFinite(value) ? ok(value) : refuse(field, `${field} contains a non-finite number`)
    case "string":
      return hasIllFormedText(value) ? refuse(field, `${field} contains U+0000 or an unpaired surrogate`) : ok(value)
    case "boolean":
      return ok(value)
    case "object":
      break
    default:
      return refuse(field, `${field} contains a value JSON cannot represent`)
  }
  if (value === null) return ok(null)
  if (ancestors.has(value)) return refuse(field, `${field} contains a cycle`)
  ancestors.add(value)
  try {
    if (Array.isArray(value)) {
      if (Object.getPrototypeOf(value) !== Array.prototype) return refuse(field, `${field} contains an exotic array`)
      const length = value.length
      budget.members += length
      const over = budgetRefusal(field, budget)
      if (over) return over
      const out: Array<unknown> = new Array(length)
      let indexes = 0
      for (const key of Reflect.ownKeys(value)) {
        const descriptor = Reflect.getOwnPropertyDescriptor(value, key)
        if (descriptor === undefined) continue
        if (key === "length") continue
        const index = typeof key === "string" ? Number(key) : NaN
        const isIndex = typeof key === "string" && Number.isInteger(index) && index >= 0 && String(index) === key &&
          index < length
        if (!isIndex) {
          if (descriptor.enumerable) return refuse(field, `${field} contains an array with extra members`)
          continue
        }
        if (!("value" in descriptor)) return refuse(field, `${field} contains an accessor property`)
        const copied = copyValue(field, descriptor.value, depth + 1, budget, ancestors)
        if (isRefusal(copied)) return copied
        out[index] = copied.value
        indexes++
      }
      if (indexes !== length) return refuse(field, `${field} contains a sparse array`)
      return ok(out)
    }
    if (!isPlainPrototype(value)) return refuse(field, `${field} contains a non-plain object`)
    const out: Record<string, unknown> = {}
    const keys = Reflect.ownKeys(value)
    for (const key of keys) {
      const descriptor = Reflect.getOwnPropertyDescriptor(value, key)
      if (descriptor === undefined || !descriptor.enumerable) continue
      if (typeof key === "symbol") return refuse(field, `${field} contains a symbol key`)
      if (!("value" in descriptor)) return refuse(field, `${field} contains an accessor property`)
      if (key === "toJSON") return refuse(field, `${field} contains a toJSON member`)
      if (hasIllFormedText(key)) return refuse(field, `${field} has a key with U+0000 or an unpaired surrogate`)
      budget.members++
      const over = budgetRefusal(field, budget)
      if (over) return over
      const copied = copyValue(field, descriptor.value, depth + 1, budget, ancestors)
      if (isRefusal(copied)) return copied
      Object.defineProperty(out, key, { value: copied.value, enumerable: true, writable: true, configurable: true })
    }
    return ok(out)
  } catch {
    return refuse(field, `${field} could not be inspected`)
  } finally {
    ancestors.delete(value)
  }
}

/**
 * Inert copy of a JSON-able JavaScript value (plain objects and dense arrays
 * only), within the depth and size limits. The copy is what gets stringified.
 */
export const jsonValue = (field: string, value: unknown): Admitted<unknown> => {
  try {
    return copyValue(field, value, 0, { nodes: 0, members: 0 }, new Set())
  } catch {
    return refuse(field, `${field} could not be inspected`)
  }
}

/** Deep-freezes a freshly built tree (used for decoded values handed to callers). */
export const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const child of Object.values(value)) deepFreeze(child)
  }
  return value
}
