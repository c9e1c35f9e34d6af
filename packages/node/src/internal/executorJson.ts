/** Plain-JSON test shared by flows, steps and results. */
import { ParseResult } from "effect"

/** Whether `value` is plain JSON: null, boolean, finite number, string, arrays, plain objects. */
export const isJson = (value: unknown, depth = 0): boolean => jsonIssue(value, "value", depth) === undefined

const member = (path: string, key: string | number): string =>
  typeof key === "number" ? `${path}[${key}]` : /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`

const kindOf = (value: unknown): string => {
  switch (typeof value) {
    case "undefined":
      return "undefined"
    case "number":
      return String(value)
    case "bigint":
      return "a bigint"
    case "function":
      return "a function"
    case "symbol":
      return "a symbol"
    default:
      return `a ${(Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null)?.constructor?.name ?? "non-plain"} object`
  }
}

/**
 * The first reason `value` is not plain JSON, naming its path under `root`
 * (`result.w: undefined is not JSON`), or `undefined` when it is JSON. The path is rendered
 * only on failure, so the check costs no string building on the success path.
 */
export const jsonIssue = (value: unknown, root: string, depth = 0): string | undefined => {
  const path: Array<string | number> = []
  const render = () => path.reduce<string>((text, key) => member(text, key), root)
  const visit = (current: unknown, level: number): string | undefined => {
    if (level > 128) return `${render()}: nested deeper than 128`
    if (current === null || typeof current === "boolean" || typeof current === "string") return undefined
    if (typeof current === "number") {
      return Number.isFinite(current) ? undefined : `${render()}: ${kindOf(current)} is not JSON`
    }
    if (Array.isArray(current)) {
      for (let index = 0; index < current.length; index++) {
        path.push(index)
        const issue = visit(current[index], level + 1)
        path.pop()
        if (issue !== undefined) return issue
      }
      return undefined
    }
    if (typeof current === "object") {
      const proto = Object.getPrototypeOf(current)
      if (proto !== Object.prototype && proto !== null) return `${render()}: ${kindOf(current)} is not JSON`
      for (const key in current) {
        if (!Object.prototype.hasOwnProperty.call(current, key)) continue
        path.push(key)
        const issue = visit((current as Record<string, unknown>)[key], level + 1)
        path.pop()
        if (issue !== undefined) return issue
      }
      return undefined
    }
    return `${render()}: ${kindOf(current)} is not JSON`
  }
  return visit(value, depth)
}

/**
 * `value` with the `undefined` members of its plain objects left out, as JSON text leaves them out:
 * an optional field given as `undefined` is an absent one, not a value that is not JSON.
 */
export const withoutUndefined = (value: unknown, depth = 0): unknown => {
  if (depth > 130 || typeof value !== "object" || value === null) return value
  if (Array.isArray(value)) return value.map((item) => withoutUndefined(item, depth + 1))
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return value
  const out: Record<string, unknown> = {}
  for (const key in value) {
    if (!Object.prototype.hasOwnProperty.call(value, key)) continue
    const member = (value as Record<string, unknown>)[key]
    if (member !== undefined) out[key] = withoutUndefined(member, depth + 1)
  }
  return out
}

/**
 * The first issue of a parse error as `<root>.<path>: <rule>`, without the value that broke it (a
 * value may hold anything, and error messages are logged and stored).
 */
export const parseIssue = (root: string, error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const first = issues[0]
  if (first === undefined) return `${root}: is not valid`
  const pathOf = (issue: ParseResult.ArrayFormatterIssue) =>
    issue.path.map((key) => typeof key === "number" ? `[${key}]` : `.${String(key)}`).join("")
  const path = pathOf(first)
  // The schema's sentence without the actual value (never repeated) and without its internal date name.
  const ruleOf = (issue: ParseResult.ArrayFormatterIssue) =>
    issue.message.replace(/,?\s*actual[\s\S]*$/, "").replace(/^Expected /, "must be ")
      .replace(/^must be DateFromSelf$/, "must be a valid date")
  if (first._tag === "Missing") return `${root}${path}: is required`
  if (first._tag === "Unexpected") return `${root}${path}: is not an allowed member`
  // A union refused at one path reports each member it tried (`Literal("a", "b")`): name them all.
  const alternatives = issues.filter((issue) => issue._tag === "Type" && pathOf(issue) === path)
    .map((issue) => ruleOf(issue).replace(/^must be /, ""))
  const rule = first._tag === "Type" && alternatives.length > 1
    ? `must be ${[...new Set(alternatives)].join(" or ")}`
    : ruleOf(first)
  return `${root}${path}: ${rule}`
}
