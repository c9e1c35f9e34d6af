/**
 * Parsing of the CLI's value syntaxes: times, durations, statuses, JSON arguments,
 * principals, approval targets. Every refusal is a usage `CliFailure` (exit 2) naming the option.
 */
import * as Queues from "@baton/control/Queues"
import { CliFailure } from "./cliFailure.js"

const usage = (code: string, message: string, hint?: string): CliFailure =>
  new CliFailure({ exitCode: 2, code, message, hint })

/** Run statuses `--status` accepts (control's `RunStatus`). */
export const runStatuses = [
  "accepted",
  "running",
  "parked",
  "waiting-approval",
  "cancelled",
  "completed",
  "failed"
] as const

/** A run status. */
export type RunStatus = typeof runStatuses[number]

/** Plan decisions `--decision` accepts. */
export const planDecisions = ["pending", "approved", "denied"] as const

const unitMs: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** A duration such as `500ms`, `2s`, `15m`, `2h`, `3d` (also `2 s`, `2 seconds`) in milliseconds. */
export const durationMs = (option: string, value: string): number => {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|millis|seconds?|minutes?|hours?|days?)\s*$/i.exec(value)
  if (match === null) {
    const bare = /^\s*\d+(?:\.\d+)?\s*$/.test(value)
    throw usage(
      "invalid_duration",
      `${option} expects a number with a unit (ms, s, m, h, d), such as 500ms, 90s, 15m, 2h or 3d, got "${value}"${
        bare ? ` (a bare number has no unit: ${value.trim()}s or ${value.trim()}ms)` : ""
      }`
    )
  }
  const unit = match[2]!.toLowerCase()
  const key = unit === "millis"
    ? "ms"
    : unit.startsWith("sec")
    ? "s"
    : unit.startsWith("min")
    ? "m"
    : unit.startsWith("hour")
    ? "h"
    : unit.startsWith("day")
    ? "d"
    : unit
  return Math.round(Number(match[1]) * unitMs[key]!)
}

/**
 * A point in time for `--since`/`--until`: ISO 8601, epoch milliseconds, or a duration back from `nowMs`.
 */
export const timePoint = (option: string, value: string, nowMs: number): number => {
  const trimmed = value.trim()
  if (/^\d{10,}$/.test(trimmed)) return Number(trimmed)
  if (/^\d+(?:\.\d+)?\s*[a-z]+$/i.test(trimmed)) {
    try {
      return nowMs - durationMs(option, trimmed)
    } catch {
      // fall through to the combined message
    }
  }
  if (/^\d{4}-\d{2}-\d{2}/.test(trimmed)) {
    const ms = Date.parse(trimmed)
    if (Number.isFinite(ms)) return ms
  }
  throw usage(
    "invalid_time",
    `${option} expects an ISO 8601 time, epoch milliseconds or a duration back from now (90s, 15m, 2h, 3d), got "${value}"`
  )
}

/** Validates `--status`. */
export const status = (value: string): RunStatus => {
  if ((runStatuses as ReadonlyArray<string>).includes(value)) return value as RunStatus
  throw usage("invalid_status", `--status must be one of ${runStatuses.join(", ")}; got "${value}"`)
}

/** Validates `--decision`. */
export const decision = (value: string): typeof planDecisions[number] => {
  if ((planDecisions as ReadonlyArray<string>).includes(value)) return value as typeof planDecisions[number]
  throw usage("invalid_decision", `--decision must be one of ${planDecisions.join(", ")}; got "${value}"`)
}

/** Parses a JSON argument; `what` names it in the message (`--input`, `signal payload`). */
export const json = (what: string, value: string): unknown => {
  try {
    return JSON.parse(value) as unknown
  } catch (error) {
    throw usage("invalid_json", `${what} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/**
 * An integer option's text as written (`--limit 20`, `--tail=0`): decimal digits with an optional
 * sign, else `undefined`. The CLI reads these options as text so a bad one gets the option's own rule.
 */
const integerText = (value: string | number): number | undefined => {
  if (typeof value === "number") return Number.isSafeInteger(value) ? value : undefined
  if (!/^[+-]?\d{1,15}$/.test(value.trim())) return undefined
  return Number(value.trim())
}

/** How a bad integer option names what it was given: the text, at most 40 characters of it. */
const given = (value: string | number): string =>
  typeof value === "number" ? String(value) : JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)

/** `--limit`: an integer 1..500. */
export const limit = (value: string | number): number => {
  const n = integerText(value)
  if (n === undefined || n < 1 || n > 500) {
    throw usage("invalid_limit", `--limit must be an integer between 1 and 500, got ${given(value)}`)
  }
  return n
}

/** `--reason`: 1 to 1000 characters without an unpaired surrogate (control's decision-reason rule). */
export const reason = (value: string): string => {
  if (value.length === 0 || value.length > 1000 || loneSurrogate.test(value)) {
    throw usage("invalid_reason", `--reason must be 1 to 1000 well-formed characters, got ${value.length}`)
  }
  return value
}

/** `--cursor` of `baton runs`: the JSON text a previous `baton runs` printed after `next: --cursor`. */
export const runsCursor = (value: string): string => {
  let parsed: unknown
  try {
    parsed = JSON.parse(value)
  } catch {
    parsed = undefined
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || !("version" in parsed)) {
    throw usage("invalid_cursor", `--cursor expects the cursor a previous \`baton runs\` printed (a JSON object), got "${value}"`)
  }
  return value
}

/** `--cursor` of `baton plans`: the number a previous `baton plans` printed. */
export const plansCursor = (value: string): string => {
  if (!/^(0|[1-9][0-9]*)$/.test(value)) {
    throw usage("invalid_cursor", `--cursor expects the cursor a previous \`baton plans\` printed (a number), got "${value}"`)
  }
  return value
}

/** `--after <seq>` of `baton journal`: a non-negative integer. */
export const after = (value: string | number): number => {
  const n = integerText(value)
  if (n === undefined || n < 0) {
    throw usage("invalid_after", `--after must be a non-negative integer (a SEQ the journal printed), got ${given(value)}`)
  }
  return n
}

/** `--tail <n>` of `baton run`: a non-negative integer. */
export const tail = (value: string | number): number => {
  const n = integerText(value)
  if (n === undefined || n < 0) {
    throw usage("invalid_tail", `--tail must be a non-negative integer, got ${given(value)}`)
  }
  return n
}

/** `--as <id>` or `--as <kind>:<id>`; kind defaults to `operator`. */
export const principal = (value: string): { readonly id: string; readonly kind: string } => {
  const colon = value.indexOf(":")
  const parsed = colon < 0
    ? { id: value, kind: "operator" }
    : { kind: value.slice(0, colon), id: value.slice(colon + 1) }
  if (parsed.id.length === 0 || parsed.kind.length === 0 || parsed.id.length > 1024 || parsed.kind.length > 1024) {
    throw usage("invalid_principal", `--as expects <id> or <kind>:<id> (1 to 1024 characters each), got "${value}"`)
  }
  return parsed
}

/** The longest id the CLI passes on (the library's lock-key bound). */
export const maxIdLength = 1024

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Validates a run, plan or request id argument before anything is opened: 1 to 1024 characters, no NUL
 * byte, no unpaired surrogate. A bad id is a usage error (exit 2) naming the argument, not "not found".
 */
export const id = (argument: string, value: string): string => {
  const problem = idProblem(value)
  if (problem !== undefined) throw usage("invalid_id", `${argument} ${problem}`)
  return value
}

/** A queue name (control's `Queues.namePattern`); anything else is usage naming `name` (the argument or option). */
export const queue = (value: string, name = "queue"): string => {
  if (!Queues.namePattern.test(value)) {
    throw usage("invalid_queue", `${name} must be 1 to 128 characters of a-z, 0-9 and . _ / - starting with a letter or digit`)
  }
  return value
}

/**
 * `--key`: the same rule as ids (control's idempotency-key rule), checked before anything is opened so an
 * empty or malformed key is a usage error naming --key, not an input refusal.
 */
export const key = (value: string): string => {
  const problem = idProblem(value)
  if (problem !== undefined) throw usage("invalid_key", `--key ${problem}`)
  return value
}

const idProblem = (value: string): string | undefined =>
  value.length === 0
    ? "must not be empty"
    : value.length > maxIdLength
    ? `must be at most ${maxIdLength} characters, got ${value.length}`
    : value.includes("\u0000")
    ? "must not contain a NUL byte"
    : loneSurrogate.test(value)
    ? "must not contain an unpaired UTF-16 surrogate"
    : undefined

/** An approval target: a plan id, or `runId:requestId` split at the first `:`. */
export type ApprovalArg =
  | { readonly _tag: "Plan"; readonly planId: string }
  | { readonly _tag: "Node"; readonly runId: string; readonly requestId: string }

/** Parses the argument of `approve`/`deny`; each id part is checked as {@link id} does. */
export const approvalTarget = (value: string): ApprovalArg => {
  const colon = value.indexOf(":")
  if (colon < 0) {
    if (value.length === 0) throw usage("invalid_target", "approve/deny expects <planId> or <runId>:<requestId>")
    return { _tag: "Plan", planId: id("planId", value) }
  }
  return { _tag: "Node", runId: id("runId", value.slice(0, colon)), requestId: id("requestId", value.slice(colon + 1)) }
}

/**
 * Moves the global options given before the verb to after it (`baton --db x runs` ≡ `baton runs --db x`):
 * @effect/cli reads options per command.
 */
export const hoistGlobals = (args: ReadonlyArray<string>, verbs: ReadonlyArray<string>): ReadonlyArray<string> => {
  const withValue = new Set(["--db", "--pg", "--schema", "--lock-wait", "--config", "--as"])
  const flags = new Set(["--json"])
  const builtIns = new Set(["--help", "-h", "--version", "--wizard"])
  const before: Array<string> = []
  let i = 0
  while (i < args.length) {
    const arg = args[i]!
    if (verbs.includes(arg)) break
    const name = arg.includes("=") ? arg.slice(0, arg.indexOf("=")) : arg
    if (withValue.has(name)) {
      if (arg.includes("=")) {
        before.push(arg)
        i += 1
      } else {
        before.push(arg, ...(args[i + 1] === undefined ? [] : [args[i + 1]!]))
        i += 2
      }
    } else if (flags.has(arg)) {
      before.push(arg)
      i += 1
    } else if (builtIns.has(arg)) {
      // `baton --db x --help`: help and version need no globals, and @effect/cli reads them only first.
      return args.slice(i)
    } else {
      return args
    }
  }
  if (i >= args.length) return args
  return [args[i]!, ...args.slice(i + 1), ...before]
}
