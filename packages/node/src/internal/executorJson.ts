/** Plain-JSON test shared by flows, steps and results. */

/** Whether `value` is plain JSON: null, boolean, finite number, string, arrays, plain objects. */
export const isJson = (value: unknown, depth = 0): boolean => {
  if (depth > 128) return false
  if (value === null || typeof value === "boolean" || typeof value === "string") return true
  if (typeof value === "number") return Number.isFinite(value)
  if (Array.isArray(value)) return value.every((item) => isJson(item, depth + 1))
  if (typeof value === "object") {
    const proto = Object.getPrototypeOf(value)
    if (proto !== Object.prototype && proto !== null) return false
    return Object.values(value).every((item) => isJson(item, depth + 1))
  }
  return false
}
