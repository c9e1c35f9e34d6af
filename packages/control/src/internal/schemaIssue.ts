/**
 * Rendering schema decoding failures as `<path>: <rule>` for `InvalidInput` (facade and runtime alike).
 */
import { ParseResult } from "effect"

/**
 * A value path as text: `root` alone for the value itself; below the facade's default root
 * `input` just the members (`budget.tokens`, `nodes[0].id`), below any other root prefixed by it
 * (`message.body`).
 */
export const renderPath = (path: ReadonlyArray<string | number>, root = "input"): string => {
  if (path.length === 0) return root
  const members = path.map((p) => (typeof p === "number" ? `[${p}]` : p)).join(".")
  return (root === "input" ? members : `${root}.${members}`).replace(/\.\[/g, "[")
}

const clip = (text: string) => (text.length > 120 ? `${text.slice(0, 117)}...` : text)

/** "Expected A, actual V" → ["A", "V"]. */
const expectedActual = (message: string): readonly [string, string] | undefined => {
  const match = /^Expected ([\s\S]*), actual ([\s\S]*)$/.exec(message)
  return match === null ? undefined : [match[1]!, match[2]!]
}

/**
 * The first decoding issue as `<path>: <rule>`. Union members failing at the
 * same path are merged into one list of allowed values.
 */
export const describeIssue = (error: ParseResult.ParseError, root = "input"): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const first = issues[0]
  if (first === undefined) return `${root}: is not valid`
  const path = renderPath(first.path.map((p) => (typeof p === "number" ? p : String(p))), root)
  switch (first._tag) {
    case "Missing":
      return `${path}: is required`
    case "Unexpected":
      return `${path}: unknown field (${first.message.replace(/^is unexpected, /, "")})`
    case "Type": {
      const same = issues.filter((issue) =>
        issue._tag === "Type" && issue.path.length === first.path.length &&
        issue.path.every((p, i) => p === first.path[i])
      )
      const parsed = same.map((issue) => expectedActual(issue.message))
      if (parsed.every((p) => p !== undefined) && parsed.length > 0) {
        const expected = [...new Set(parsed.flatMap((p) => p![0].split(" | ")))].filter((e) => e !== "undefined")
        return `${path}: must be ${clip(expected.join(" | "))}, received ${clip(parsed[0]![1])}`
      }
      return `${path}: ${clip(first.message)}`
    }
    default:
      return `${path}: ${clip(first.message)}`
  }
}

