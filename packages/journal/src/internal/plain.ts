/**
 * Strict admission check for payload, meta and checkpoint state: the value must
 * already be JSON, so that what is stored is what the caller passed. Values
 * `JSON.stringify` would silently change are refused instead: non-finite
 * numbers, `undefined`, functions, symbols, BigInt, and objects other than
 * plain objects, arrays and valid `Date`s (kept: a `Date` is stored as its ISO
 * string). The walk reads property descriptors only, so no
 * caller code runs (no getters, no `toJSON`, no proxy traps).
 *
 * @internal
 */
import { types } from "node:util"

const maxDepth = 256
const identifierKey = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/

/** A path segment for `key`; `shown` hides a key a redaction rule would change. */
const segment = (key: string, shown: (key: string) => string): string => {
  const visible = shown(key)
  if (identifierKey.test(visible)) return `.${visible}`
  return `[${JSON.stringify(visible.length > 64 ? `${visible.slice(0, 64)}…` : visible)}]`
}

const describeObject = (value: object): string => {
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return "an object with toJSON"
  if (value instanceof Map) return "a Map"
  if (value instanceof Set) return "a Set"
  if (value instanceof Error) return "an Error"
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return "binary data"
  return "an instance of a class"
}

/**
 * The first reason `value` is not plain JSON, as `"<path>: <rule>"`, or
 * `undefined` when it is. `root` is the path prefix (`input.payload`).
 */
export const plainProblem = (
  value: unknown,
  root: string,
  shown: (key: string) => string = (key) => key
): string | undefined => {
  const ancestors = new Set<object>()
  const check = (current: unknown, path: string, depth: number): string | undefined => {
    switch (typeof current) {
      case "string":
      case "boolean":
        return undefined
      case "number":
        return Number.isFinite(current) ? undefined : `${path}: ${String(current)} is not a JSON number`
      case "undefined":
        return `${path}: undefined is not JSON (omit the member or use null)`
      case "bigint":
        return `${path}: a BigInt is not JSON`
      case "function":
        return `${path}: a function is not JSON`
      case "symbol":
        return `${path}: a symbol is not JSON`
    }
    if (current === null) return undefined
    const object = current as object
    if (types.isProxy(object)) return `${path}: a Proxy is not a plain JSON value`
    if (depth > maxDepth) return `${path}: nested deeper than ${maxDepth} levels`
    if (ancestors.has(object)) return `${path}: a cycle is not JSON`
    const proto = Object.getPrototypeOf(object) as unknown
    if (proto === Date.prototype) {
      if (Reflect.ownKeys(object).length > 0) return `${path}: a Date with own members is not a plain JSON value`
      return Number.isNaN((object as Date).getTime()) ? `${path}: an invalid Date is not JSON` : undefined
    }
    const array = Array.isArray(object)
    if (array ? proto !== Array.prototype : proto !== Object.prototype && proto !== null) {
      return `${path}: ${describeObject(object)} is not a plain JSON value`
    }
    ancestors.add(object)
    try {
      for (const key of Reflect.ownKeys(object)) {
        if (typeof key === "symbol") return `${path}: a symbol-keyed member is not JSON`
        if (array && key === "length") continue
        const at = array ? `${path}[${key}]` : `${path}${segment(key, shown)}`
        if (array && !/^(0|[1-9][0-9]*)$/.test(key)) return `${at}: a named member of an array is not JSON`
        const descriptor = Object.getOwnPropertyDescriptor(object, key)!
        if (!("value" in descriptor)) return `${at}: is an accessor property (getters are not called)`
        if (descriptor.enumerable !== true) return `${at}: is a non-enumerable property`
        const problem = check(descriptor.value, at, depth + 1)
        if (problem !== undefined) return problem
      }
      if (array) {
        // Own keys came in index order; a hole is an index below length with no own member.
        const length = (object as ReadonlyArray<unknown>).length
        for (let index = 0; index < length; index++) {
          if (!Object.prototype.hasOwnProperty.call(object, index)) {
            return `${path}[${index}]: a hole in a sparse array is not JSON`
          }
        }
      }
      return undefined
    } finally {
      ancestors.delete(object)
    }
  }
  return check(value, root, 0)
}
