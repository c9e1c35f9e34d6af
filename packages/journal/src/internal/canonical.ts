/**
 * Canonical JSON: `JSON.stringify` semantics (`toJSON`, `undefined` members
 * dropped, non-finite numbers → `null`) with object keys sorted recursively,
 * refusing what cannot be stored the same way on both dialects (BigInt, cycles,
 * depth > 256, non-plain containers, U+0000 or unpaired surrogates in strings
 * and keys).
 *
 * @internal
 */
import { Either } from "effect"
import { textProblem } from "./text.js"

export const maxDepth = 256

class Refused extends Error {}

const isOpaque = (value: object): string | undefined => {
  if (value instanceof Map) return "a Map"
  if (value instanceof Set) return "a Set"
  if (value instanceof WeakMap || value instanceof WeakSet) return "a weak collection"
  if (value instanceof Promise) return "a Promise"
  if (value instanceof RegExp) return "a RegExp"
  if (value instanceof Error) return "an Error"
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return "binary data"
  return undefined
}

/** Encode `value` canonically; `Left(reason)` when it cannot be stored. `undefined` at the top is refused. */
export const encode = (value: unknown): Either.Either<string, string> => {
  const ancestors = new Set<object>()
  const fail = (reason: string): never => {
    throw new Refused(reason)
  }
  const checkText = (text: string, what: string): void => {
    const problem = textProblem(text)
    if (problem !== undefined) fail(`${what} contains ${problem === "NUL" ? "U+0000" : "an unpaired surrogate"}`)
  }
  // Returns undefined for values JSON.stringify omits (undefined, functions, symbols).
  const write = (input: unknown, key: string, depth: number): string | undefined => {
    let current = input
    if (typeof current === "object" && current !== null && typeof (current as { toJSON?: unknown }).toJSON === "function") {
      current = (current as { toJSON: (key: string) => unknown }).toJSON(key)
    }
    if (current instanceof Number || current instanceof String || current instanceof Boolean) {
      current = current.valueOf()
    }
    switch (typeof current) {
      case "string":
        checkText(current, "a string")
        return JSON.stringify(current)
      case "number":
        return Number.isFinite(current) ? JSON.stringify(current) : "null"
      case "boolean":
        return current ? "true" : "false"
      case "bigint":
        return fail("a BigInt is not JSON")
      case "undefined":
      case "function":
      case "symbol":
        return undefined
    }
    if (current === null) return "null"
    const object = current as object
    if (depth > maxDepth) fail(`nested deeper than ${maxDepth} levels`)
    if (ancestors.has(object)) fail("a cycle is not JSON")
    const opaque = isOpaque(object)
    if (opaque !== undefined) fail(`${opaque} is not a plain JSON value`)
    ancestors.add(object)
    try {
      if (Array.isArray(object)) {
        // Not `map`: it skips holes, and `[1,,3]` would encode as invalid JSON.
        const items: Array<string> = []
        for (let index = 0; index < object.length; index++) {
          if (!Object.prototype.hasOwnProperty.call(object, index)) fail(`a hole at index ${index} is not JSON`)
          items.push(write(object[index], String(index), depth + 1) ?? "null")
        }
        return `[${items.join(",")}]`
      }
      const keys = Object.keys(object).sort()
      const members: Array<string> = []
      for (const member of keys) {
        checkText(member, "a key")
        const encoded = write((object as Record<string, unknown>)[member], member, depth + 1)
        if (encoded !== undefined) members.push(`${JSON.stringify(member)}:${encoded}`)
      }
      return `{${members.join(",")}}`
    } finally {
      ancestors.delete(object)
    }
  }
  try {
    const encoded = write(value, "", 0)
    return encoded === undefined ? Either.left("undefined is not JSON") : Either.right(encoded)
  } catch (error) {
    if (error instanceof Refused) return Either.left(error.message)
    if (error instanceof RangeError) return Either.left(`nested too deeply to encode`)
    return Either.left(`cannot be encoded: ${error instanceof Error ? error.message : String(error)}`)
  }
}


