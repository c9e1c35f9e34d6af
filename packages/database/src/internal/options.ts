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
 * `WriteRetryOptions`: `maxAttempts` a positive safe integer,
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

/**
 * Defaults of the PostgreSQL session timeouts. All stay well below the 30 s after
 * which a run's heartbeat counts as stale, so a session whose host went silent is
 * gone, with its locks, before another host may take the run over.
 */
export const pgDefaults = {
  lockTimeout: Duration.seconds(10),
  statementTimeout: Duration.seconds(15),
  idleInTransactionTimeout: Duration.seconds(10),
  keepAliveInitialDelay: Duration.seconds(5)
} as const

/** PostgreSQL keeps these settings as a 32-bit count of milliseconds. */
const maxSettingMs = 2_147_483_647

/** Optional positive finite duration that PostgreSQL can hold as a millisecond setting. */
const settingDuration = (option: string, value: unknown): Problem | undefined => {
  const invalid = duration(option, value, true)
  if (invalid !== undefined || value === undefined) return invalid
  return Duration.toMillis(Duration.decode(value as Duration.DurationInput)) > maxSettingMs
    ? problem(option, `must be at most ${maxSettingMs} milliseconds`, value)
    : undefined
}

const ms = (value: unknown, fallback: Duration.Duration): number =>
  Duration.toMillis(value === undefined ? fallback : Duration.decode(value as Duration.DurationInput))

/**
 * A lock wait must end by `lockTimeout` (failing `busy`, which the writer replays)
 * before `statementTimeout` cancels the whole statement.
 */
const lockBeforeStatement = (options: Record<string, unknown>): Problem | undefined => {
  const lock = ms(options["lockTimeout"], pgDefaults.lockTimeout)
  const statement = ms(options["statementTimeout"], pgDefaults.statementTimeout)
  if (lock < statement) return undefined
  if (options["statementTimeout"] === undefined) {
    return problem("lockTimeout", "must be shorter than statementTimeout (15 seconds by default)", options["lockTimeout"])
  }
  const rule = options["lockTimeout"] === undefined
    ? "must be longer than lockTimeout (10 seconds by default)"
    : "must be longer than lockTimeout"
  return problem("statementTimeout", rule, options["statementTimeout"])
}

/** `PgDatabaseOptions` other than `url` and `schema` (checked by their own admission). */
export const pgProblem = (options: Record<string, unknown>): Problem | undefined =>
  first(
    boolean("readOnly", options["readOnly"]),
    positiveInteger("maxConnections", options["maxConnections"]),
    duration("connectTimeout", options["connectTimeout"], true),
    settingDuration("lockTimeout", options["lockTimeout"]),
    settingDuration("statementTimeout", options["statementTimeout"]),
    settingDuration("idleInTransactionTimeout", options["idleInTransactionTimeout"]),
    settingDuration("keepAliveInitialDelay", options["keepAliveInitialDelay"]),
    string("applicationName", options["applicationName"]),
    writerProblem(options["writer"], "writer.")
  ) ?? lockBeforeStatement(options)
