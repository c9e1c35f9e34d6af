/**
 * The one error NodeRuntime's own validation raises. Lives here so HostIdentity, Flow and
 * NodeRuntime share it without importing each other.
 */
import { Schema } from "effect"

/**
 * A NodeRuntime option or flow catalog that cannot be used. `field` names the option
 * (`maxRuns`, `flows[2].version`, `hostId`); `message` states the rule it broke.
 *
 * @since 0.1.0
 * @category errors
 */
export class NodeRuntimeError extends Schema.TaggedError<NodeRuntimeError>()("@baton/node/NodeRuntimeError", {
  reason: Schema.Literal("invalid_options", "duplicate_flow", "read_only_host"),
  field: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/** Journal Identifier rules: 1..1024 UTF-16 units, no U+0000, no unpaired surrogate. */
export const identifierIssue = (value: string, max = 1024): string | undefined => {
  if (value.length === 0) return "must not be empty"
  if (value.length > max) return `must be at most ${max} characters`
  if (value.includes("\u0000")) return "must not contain U+0000"
  if (!isWellFormed(value)) return "must not contain an unpaired surrogate"
  return undefined
}

/** `String.prototype.isWellFormed` without relying on the Node 20 lib typings. */
export const isWellFormed = (value: string): boolean => {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = value.charCodeAt(i + 1)
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false
      i++
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false
    }
  }
  return true
}
