/**
 * Validation of the options the layers and the writer take. Each check returns
 * `undefined` or a problem naming the option and the rule
 * (`"maxConnections: must be a positive safe integer (got -1)"`); the callers
 * decide how a problem surfaces: `DurableWriter.make` throws (a programming
 * error, its signature has no error channel), the database layers fail with a
 * typed `DatabaseOpenError` before opening anything.
 *
 * @internal
 */
import { Duration } from "effect"

/** A problem with one option: its dotted name and the rule it broke. */
export interface Problem {
  readonly option: string
  readonly message: string
}

const shown = (value: unknown): string =>
  typeof value === "number" || typeof value === "boolean" || typeof value === "bigint" || value === null
    ? String(value)
    : typeof value === "string"
    ? JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)
    : Array.isArray(value)
    ? "an array"
    : typeof value

const problem = (option: string, rule: string, value: unknown): Problem => ({
  option,
  message: `${option}: ${rule} (got ${shown(value)})`
})

/** Optional positive safe integer. */
export const positiveInteger = (option: string, value: unknown): Problem | undefined =>
  value === undefined || (typeof value === "number" && Number.isSafeInteger(value) && value >= 1)
    ? undefined
    : problem(option, "must be a positive safe integer", value)

/** Optional non-negative finite number (milliseconds). */
export const nonNegativeFinite = (option: string, value: unknown): Problem | undefined =>
  value === undefined || (typeof value === "number" && Number.isFinite(value) && value >= 0)
    ? undefined
    : problem(option, "must be a non-negative finite number of milliseconds", value)

/** Optional boolean. */
export const boolean = (option: string, value: unknown): Problem | undefined =>
  value === undefined || typeof value === "boolean" ? undefined : problem(option, "must be a boolean", value)

/** Optional string. */
export const string = (option: string, value: unknown): Problem | undefined =>
  value === undefined || typeof value === "string" ? undefined : problem(option, "must be a string", value)

/** Optional integer in `[min, max]`. */
export const integerIn = (option: string, value: unknown, min: number, max: number, rule: string): Problem | undefined =>
  value === undefined || (typeof value === "number" && Number.isSafeInteger(value) && value >= min && value <= max)
    ? undefined
    : problem(option, rule, value)

/**
 * Optional `Duration.DurationInput` that decodes to a finite duration, strictly
 * positive when `positive`. Raw numbers are checked before decoding because
 * Effect's decoder turns negative and NaN inputs into zero silently.
 */
export const duration = (option: string, value: unknown, positive: boolean): Problem | undefined => {
  if (value === undefined) return undefined
  const rule = positive ? "must be a positive finite duration" : "must be a non-negative finite duration"
  if (typeof value === "number" && !(Number.isFinite(value) && (positive ? value > 0 : value >= 0))) {
    return problem(option, rule, value)
  }
  if (typeof value === "bigint" && (positive ? value <= 0n : value < 0n)) return problem(option, rule, value)
  if (typeof value === "string" && value.trim().startsWith("-")) return problem(option, rule, value)
  let decoded: Duration.Duration
  try {
    decoded = Duration.decode(value as Duration.DurationInput)
  } catch {
    return problem(option, `${rule} (a number of milliseconds, a Duration or a string such as "5 seconds")`, value)
  }
  if (!Duration.isFinite(decoded) || (positive && Duration.toMillis(decoded) <= 0)) {
    return problem(option, rule, value)
  }
  return undefined
}

/** The first problem, if any. */
export const first = (...problems: ReadonlyArray<Problem | undefined>): Problem | undefined =>
  problems.find((p) => p !== undefined)

/**
 * `WriteRetryOptions` (spec 4.2, 6.4): `maxAttempts` a positive safe integer,
 * `baseDelayMs` and `maxDelayMs` non-negative finite milliseconds. `prefix`
 * names where the options sit (`"writer."` inside a layer's options).
 */
export const writerProblem = (options: unknown, prefix = ""): Problem | undefined => {
  if (options === undefined) return undefined
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    return problem(prefix === "" ? "options" : prefix.slice(0, -1), "must be an object", options)
  }
  const o = options as Record<string, unknown>
  return first(
    positiveInteger(`${prefix}maxAttempts`, o["maxAttempts"]),
    nonNegativeFinite(`${prefix}baseDelayMs`, o["baseDelayMs"]),
    nonNegativeFinite(`${prefix}maxDelayMs`, o["maxDelayMs"])
  )
}

/** `SqliteDatabaseOptions` other than `filename` (checked by the path admission). */
export const sqliteProblem = (options: Record<string, unknown>): Problem | undefined =>
  first(
    boolean("readOnly", options["readOnly"]),
    duration("busyTimeout", options["busyTimeout"], false),
    integerIn("mode", options["mode"], 0, 0o7777, "must be an integer permission mode between 0 and 0o7777"),
    boolean("createDirectory", options["createDirectory"]),
    writerProblem(options["writer"], "writer.")
  )

/** `PgDatabaseOptions` other than `url` and `schema` (checked by their own admission). */
export const pgProblem = (options: Record<string, unknown>): Problem | undefined =>
  first(
    boolean("readOnly", options["readOnly"]),
    positiveInteger("maxConnections", options["maxConnections"]),
    duration("connectTimeout", options["connectTimeout"], true),
    duration("lockTimeout", options["lockTimeout"], true),
    string("applicationName", options["applicationName"]),
    writerProblem(options["writer"], "writer.")
  )
