/** The step machinery behind `Step.run` and `Step.checkpoint`. */
import type * as AttemptStore from "@baton/run-store/AttemptStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Clock, Context, Duration, Effect, Exit, Fiber, Option, Schedule, Schema } from "effect"
import * as crypto from "node:crypto"
import { jsonIssue } from "./executorJson.js"
import { durable, failJournal, flushLossy, lossy, withPrelude } from "./executorJournal.js"
import { StepMisuse } from "./executorMisuse.js"
import { type DriveState, endDrive } from "./executorState.js"
import type { Json } from "./executorTypes.js"

/** The step an effect runs in: name, attempt number, and the checkpoint it resumes from. */
export class StepContext extends Context.Tag("@baton/node/StepContext")<StepContext, {
  readonly name: string
  readonly attempt: number
  readonly resumeFrom: Option.Option<Json>
}>() {}

/** Options of `Step.run`. */
export interface StepOptions<A, AE> {
  readonly result?: Schema.Schema<A, AE>
  readonly commit?: (value: A) => Effect.Effect<void, unknown, SqlClient.SqlClient>
  readonly summarize?: (value: A) => Json
  readonly retry?: {
    readonly times: number
    readonly delay?: Duration.DurationInput
    readonly schedule?: Schedule.Schedule<unknown, any>
  }
}

/** hex sha256 of `"step:" + name`: the attempt store's step key. */
export const stepDigest = (name: string): string =>
  crypto.createHash("sha256").update(`step:${name}`).digest("hex")

export const misuse = (code: StepMisuse["code"], step: string, message: string): Effect.Effect<never> =>
  Effect.die(new StepMisuse({ code, step, message }))

/** Step and wait names: 1..200 characters, no NUL, not starting with `$`. */
export const checkName = (state: DriveState, name: string, kind: string): Effect.Effect<void> => {
  if (typeof name !== "string" || name.length < 1 || name.length > 200 || name.includes("\u0000")) {
    return misuse("invalid_name", String(name), `${kind} name must be 1..200 characters without U+0000`)
  }
  if (name.startsWith("$")) {
    return misuse("invalid_name", name, `${kind} name ${name} starts with "$", which is reserved`)
  }
  const key = kind === "step" ? name : `$${kind}:${name}`
  if (state.usedNames.has(key)) {
    return misuse("duplicate_step", name, `${kind} ${name} is used twice in one run; names must be unique`)
  }
  state.usedNames.add(key)
  return Effect.void
}

const describe = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value)
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) return String(value)
  if (typeof value === "bigint") return `${value}n`
  if (Duration.isDuration(value)) return String(value)
  if (typeof value === "function") return "a function"
  return Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : `a ${typeof value}`
}

/**
 * `Step.run` options, checked before anything of the step is written: `result` a
 * Schema; `commit` and `summarize` functions; `retry.times` a non-negative integer; `retry.delay` a
 * finite, non-negative duration. Anything else → `invalid_options` naming the option and the rule.
 */
export const checkOptions = (name: string, options: unknown): Effect.Effect<void> => {
  if (options === undefined) return Effect.void
  const refuse = (option: string, rule: string, got: unknown) =>
    misuse("invalid_options", name, `step ${name}: option ${option} must be ${rule} (got ${describe(got)})`)
  if (typeof options !== "object" || options === null) return refuse("options", "an object", options)
  const { commit, result, retry, summarize } = options as Record<string, unknown>
  if (result !== undefined && !Schema.isSchema(result)) return refuse("result", "a Schema", result)
  if (commit !== undefined && typeof commit !== "function") return refuse("commit", "a function", commit)
  if (summarize !== undefined && typeof summarize !== "function") return refuse("summarize", "a function", summarize)
  if (retry === undefined) return Effect.void
  if (typeof retry !== "object" || retry === null) return refuse("retry", "an object { times, delay? }", retry)
  const { delay, schedule, times } = retry as Record<string, unknown>
  if (typeof times !== "number" || !Number.isSafeInteger(times) || times < 0) {
    return refuse("retry.times", "a non-negative integer", times)
  }
  if (schedule !== undefined && !Schedule.isSchedule(schedule)) return refuse("retry.schedule", "a Schedule", schedule)
  if (schedule !== undefined && delay !== undefined) return refuse("retry.delay", "absent when retry.schedule is given", delay)
  if (delay !== undefined) {
    const decoded = Duration.decodeUnknown(delay)
    if (
      Option.isNone(decoded) || !Duration.isFinite(decoded.value) ||
      (typeof delay === "number" && !(delay >= 0)) || (typeof delay === "bigint" && delay < 0n)
    ) {
      return refuse("retry.delay", "a finite, non-negative Duration", delay)
    }
  }
  return Effect.void
}

/** The 1 KiB ceiling of a `summarize` detail (UTF-8 bytes of its JSON). */
const summaryLimit = 1024

/**
 * The `summarize` detail of a completed step, or `undefined`. The step's work is done and its
 * result is good, so a detail that is not JSON or exceeds 1 KiB does not fail the run: it is left
 * out of `baton.step.completed` with a warning naming the step and the rule.
 */
const summaryOf = <A>(
  state: DriveState,
  name: string,
  value: A,
  summarize: ((value: A) => Json) | undefined
): Effect.Effect<Json | undefined> =>
  Effect.suspend(() => {
    const detail = summarize === undefined ? undefined : summarize(value)
    if (detail === undefined) return Effect.succeed(undefined)
    const issue = jsonIssue(detail, "summary")
    const bytes = issue === undefined ? Buffer.byteLength(JSON.stringify(detail), "utf8") : 0
    if (issue === undefined && bytes <= summaryLimit) return Effect.succeed(detail)
    const rule = issue === undefined
      ? `must be at most ${summaryLimit} bytes of JSON (got ${bytes})`
      : `must be JSON (${issue})`
    return Effect.logWarning(`the summary of step ${name} ${rule}; baton.step.completed carries no detail`).pipe(
      Effect.annotateLogs({ runId: state.run.runId, step: name }),
      Effect.as(undefined)
    )
  })

/**
 * `{ tag?, message }` of a failure, at most 4 KiB. A tagged error without a message is described
 * by its fields; an `ApprovalDenied` also carries the deciding `principal` and the `reason`.
 */
export const errorRecord = (cause: Cause.Cause<unknown>): { tag?: string; message: string; [key: string]: unknown } => {
  const failure = Cause.failureOption(cause)
  const value: unknown = Option.isSome(failure) ? failure.value : Option.getOrUndefined(Cause.dieOption(cause))
  const tag = typeof value === "object" && value !== null && "_tag" in value ? String(value._tag) : undefined
  const record = typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined
  if (tag === "ApprovalDenied" && record !== undefined) {
    const principal = record["decisionPrincipal"] as { id?: string; kind?: string } | undefined
    const reason = typeof record["reason"] === "string" ? record["reason"] : undefined
    return {
      tag,
      message: `approval denied by ${principal?.kind ?? "?"}:${principal?.id ?? "?"}${reason === undefined ? "" : `: ${reason}`}`,
      principal: { id: principal?.id ?? null, kind: principal?.kind ?? null },
      ...(reason === undefined ? {} : { reason })
    }
  }
  let message = record !== undefined && typeof record["message"] === "string" ? record["message"] : undefined
  if (message === undefined || message.length === 0) {
    if (record !== undefined && tag !== undefined) {
      const fields = Object.fromEntries(Object.entries(record).filter(([key]) => key !== "_tag"))
      message = `${tag} ${safeJson(fields)}`
    } else if (record !== undefined && String(value) === "[object Object]") {
      // A plain object failure (`Effect.fail({ code: 7 })`) says what it holds, not "[object Object]".
      message = safeJson(record) || "a failure with no message"
    } else {
      message = value === undefined ? Cause.pretty(cause) : String(value)
    }
  }
  return { ...(tag === undefined ? {} : { tag }), message: message.slice(0, 4000) }
}

const safeJson = (value: unknown): string => {
  try {
    return JSON.stringify(value) ?? ""
  } catch {
    return ""
  }
}

const meta = (state: DriveState, name: string) => ({ name, drive: state.run.drive, host: state.hostLabel })

class Lost {
  readonly _tag = "Lost"
}

/** Record a reserved attempt (`$result`, `$wait:<n>`, `$approval:<id>`) finished at once. */
export const recordReserved = (
  state: DriveState,
  name: string,
  finished: "completed" | "failed",
  fields: { readonly outcome?: unknown; readonly error?: unknown }
): Effect.Effect<void, unknown> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const digest = stepDigest(name)
    const previous = state.latest.get(digest)
    const attempt = {
      runId: state.run.runId,
      stepKeyDigest: digest,
      attempt: previous === undefined ? 0 : previous.attempt + 1,
      state: finished,
      startedAtMs: now,
      finishedAtMs: now,
      meta: meta(state, name),
      ...fields
    } as AttemptStore.Attempt
    const result = yield* state.services.attempts.put(attempt, state.run.owner)
    if (result._tag !== "Inserted" && result._tag !== "ExistingSame" && result._tag !== "Upserted") {
      return yield* Effect.fail(new Lost())
    }
    state.latest.set(digest, attempt)
  })

/** Whether a failure is our fence-loss marker. */
export const isLost = (error: unknown): boolean => error instanceof Lost

export const lost = (): unknown => new Lost()

/**
 * Best effort, bounded by 1 s. The attempt's fiber is interrupted and in an uninterruptible
 * region, where a timeout cannot stop a write blocked by another writer's lock (it would wait,
 * and the write could commit long after the drive lost its lease). So the write runs
 * interruptibly in a fiber of its own, which the timeout does stop.
 */
const finishInterrupted = (state: DriveState, digest: string, attempt: number): Effect.Effect<void> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    yield* state.services.attempts.finish(
      { runId: state.run.runId, stepKeyDigest: digest, attempt, state: "interrupted", finishedAtMs: now } as AttemptStore.FinishAttempt,
      state.run.owner
    )
  }).pipe(
    Effect.interruptible,
    Effect.timeout("1 second"),
    Effect.ignore,
    Effect.forkDaemon,
    Effect.flatMap(Fiber.join)
  )

const complete = <A, AE>(
  state: DriveState,
  name: string,
  digest: string,
  attempt: number,
  value: A,
  startedNanos: bigint,
  resumed: boolean,
  options: StepOptions<A, AE> | undefined
): Effect.Effect<void> =>
  Effect.gen(function*() {
    // A void step (undefined) stores no value; a later drive returns undefined again.
    const encoded = options?.result === undefined || value === undefined
      ? value
      : yield* Schema.encode(options.result)(value).pipe(
        Effect.catchAll(() => misuse("result_not_json", name, `the result of step ${name} does not encode with its schema`))
      )
    const issue = encoded === undefined ? undefined : jsonIssue(encoded, "result")
    if (issue !== undefined) {
      return yield* misuse("result_not_json", name, `the result of step ${name} is not JSON (${issue})`)
    }
    const detail = yield* summaryOf(state, name, value, options?.summarize)
    const now = yield* Clock.currentTimeMillis
    const durationMs = Number((((yield* Clock.currentTimeNanos) - startedNanos) / 1_000_000n))
    const { attempts, journal, sql } = state.services
    yield* flushLossy(state)
    yield* withPrelude(state, journal.transact(
      Effect.gen(function*() {
        const finished = yield* attempts.finish(
          {
            runId: state.run.runId,
            stepKeyDigest: digest,
            attempt,
            state: "completed",
            finishedAtMs: now,
            outcome: encoded === undefined ? {} : { value: encoded }
          } as AttemptStore.FinishAttempt,
          state.run.owner
        )
        if (finished._tag !== "Finished") return yield* Effect.fail(new Lost())
        if (options?.commit !== undefined) {
          yield* options.commit(value).pipe(
            Effect.provideService(SqlClient.SqlClient, sql),
            Effect.mapError((error) => new CommitFailed({ error }))
          )
        }
        yield* durable(state, "baton.step.completed", {
          step: name,
          attempt,
          durationMs,
          resumedFromCheckpoint: resumed,
          ...(detail === undefined ? {} : { detail })
        })
      }),
      { key: state.run.runId }
    )).pipe(
      Effect.catchAll((error): Effect.Effect<never> => {
        if (error instanceof Lost) return endDrive(state, "lease-lost")
        if (error instanceof CommitFailed && !isStorageTrouble(error.error)) {
          return Effect.die(error.error)
        }
        return failJournal(state, error instanceof CommitFailed ? error.error : error)
      })
    )
    state.latest.set(digest, {
      runId: state.run.runId,
      stepKeyDigest: digest,
      attempt,
      state: "completed",
      startedAtMs: now,
      finishedAtMs: now,
      outcome: encoded === undefined ? {} : { value: encoded },
      meta: meta(state, name)
    } as AttemptStore.Attempt)
    state.stepsCompleted++
  })

class CommitFailed {
  readonly _tag = "CommitFailed"
  constructor(readonly fields: { readonly error: unknown }) {}
  get error() {
    return this.fields.error
  }
}

/** Database trouble a later drive may not meet (busy, io, full): end the drive instead of failing. */
const isStorageTrouble = (error: unknown): boolean => {
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  return ["busy", "io", "full", "read_only", "unknown"].includes(code) &&
    typeof error === "object" && error !== null && "_tag" in error &&
    String(error._tag) === "@baton/database/DatabaseError"
}

const recordFailure = (
  state: DriveState,
  name: string,
  digest: string,
  attempt: number,
  cause: Cause.Cause<unknown>
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const error = errorRecord(cause)
    const now = yield* Clock.currentTimeMillis
    const { attempts, journal } = state.services
    yield* flushLossy(state)
    yield* withPrelude(state, journal.transact(
      Effect.gen(function*() {
        const finished = yield* attempts.finish(
          { runId: state.run.runId, stepKeyDigest: digest, attempt, state: "failed", finishedAtMs: now, error } as AttemptStore.FinishAttempt,
          state.run.owner
        )
        if (finished._tag !== "Finished") return yield* Effect.fail(new Lost())
        yield* durable(state, "baton.step.failed", { step: name, attempt, error })
      }),
      { key: state.run.runId }
    )).pipe(Effect.catchAll((e) => e instanceof Lost ? endDrive(state, "lease-lost") : failJournal(state, e)))
    state.latest.set(digest, {
      runId: state.run.runId,
      stepKeyDigest: digest,
      attempt,
      state: "failed",
      startedAtMs: now,
      finishedAtMs: now,
      error,
      meta: meta(state, name)
    } as AttemptStore.Attempt)
  })

/** One attempt of a step: start it, run the body, record the end. */
const attemptOnce = <A, E, R, AE>(
  state: DriveState,
  name: string,
  digest: string,
  attempt: number,
  resumeFrom: Option.Option<Json>,
  body: Effect.Effect<A, E, R>,
  options: StepOptions<A, AE> | undefined
): Effect.Effect<A, E, Exclude<R, StepContext>> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const row = {
        runId: state.run.runId,
        stepKeyDigest: digest,
        attempt,
        state: "running",
        startedAtMs: now,
        meta: meta(state, name),
        ...(Option.isSome(resumeFrom) ? { checkpoint: resumeFrom.value } : {})
      } as AttemptStore.Attempt
      // The attempt row and its `baton.step.started` entry in one transaction (with the drive's
      // prelude on its first write): a step's start costs one write, and a deposed owner's entry
      // cannot land.
      yield* restore(flushLossy(state))
      const put = yield* restore(withPrelude(
        state,
        state.services.journal.transact(
          Effect.gen(function*() {
            const put = yield* state.services.attempts.put(row, state.run.owner)
            if (put._tag === "Inserted" || put._tag === "ExistingSame" || put._tag === "Upserted") {
              yield* durable(state, "baton.step.started", { step: name, attempt })
            }
            return put
          }),
          { key: state.run.runId }
        )
      )).pipe(
        Effect.catchAll((error) => failJournal(state, error))
      )
      if (put._tag !== "Inserted" && put._tag !== "ExistingSame" && put._tag !== "Upserted") {
        return yield* endDrive(state, "lease-lost")
      }
      state.latest.set(digest, row)
      if (Option.isSome(resumeFrom)) state.resumedFromCheckpoint++
      const startedNanos = yield* Clock.currentTimeNanos
      const exit = yield* Effect.exit(restore(
        Effect.provideService(body, StepContext, { name, attempt, resumeFrom }) as Effect.Effect<A, E, Exclude<R, StepContext>>
      ))
      if (Exit.isSuccess(exit)) {
        const completed = yield* Effect.exit(restore(
          complete(state, name, digest, attempt, exit.value, startedNanos, Option.isSome(resumeFrom), options)
        ))
        if (Exit.isSuccess(completed)) return exit.value
        // A result refused as misuse (not JSON) or a failed `commit` fails the run: the attempt ends
        // `failed` as a failing body's does, rather than staying `running` for ever. An interruption
        // (fence or storage lost) leaves it to the next drive, as during the body.
        if (!Cause.isInterrupted(completed.cause)) {
          yield* restore(recordFailure(state, name, digest, attempt, completed.cause))
        }
        return yield* Effect.failCause(completed.cause)
      }
      if (Cause.isInterruptedOnly(exit.cause)) {
        yield* finishInterrupted(state, digest, attempt)
        return yield* exit
      }
      yield* restore(recordFailure(state, name, digest, attempt, exit.cause))
      return yield* exit
    })
  )

/** `Step.run` over the drive state. */
export const runStep = <A, E, R, AE>(
  state: DriveState,
  name: string,
  body: Effect.Effect<A, E, R>,
  options: StepOptions<A, AE> | undefined
): Effect.Effect<A, E, Exclude<R, StepContext>> =>
  Effect.gen(function*() {
    yield* checkName(state, name, "step")
    yield* checkOptions(name, options)
    if (state.stopping()) return yield* endDrive(state, "shutdown")
    const digest = stepDigest(name)
    const latest = state.latest.get(digest)
    if (latest?.state === "completed") {
      state.skippedSteps++
      const stored = (latest.outcome as { value?: unknown } | undefined)?.value
      if (options?.result === undefined) return stored as A
      return yield* Schema.decodeUnknown(options.result)(stored).pipe(
        Effect.catchAll(() =>
          misuse(
            "result_mismatch",
            name,
            `the stored result of step ${name} no longer matches its schema; the code changed since the run started`
          )
        )
      )
    }
    let attempt = 0
    let resumeFrom: Option.Option<Json> = Option.none()
    if (latest !== undefined) {
      attempt = latest.attempt + 1
      if (latest.state === "running") {
        const previousOwner = state.previousOwner
        yield* abandon(state, name, digest, latest, previousOwner)
      }
      if (latest.state === "running" || latest.state === "interrupted") {
        resumeFrom = latest.checkpoint === undefined ? Option.none() : Option.some(latest.checkpoint as Json)
      }
    }
    const times = options?.retry?.times ?? 0
    // A schedule paces the attempts (and may end them before `times`); its driver sleeps its delays.
    const driver = options?.retry?.schedule === undefined ? undefined : yield* Schedule.driver(options.retry.schedule)
    for (let tried = 0;; tried++) {
      const exit = yield* Effect.exit(attemptOnce(state, name, digest, attempt, resumeFrom, body, options))
      if (Exit.isSuccess(exit)) return exit.value
      const failure = Cause.failureOption(exit.cause)
      const retryable = tried < times && Option.isSome(failure) && !Cause.isInterrupted(exit.cause)
      if (!retryable) return yield* exit
      if (driver !== undefined) {
        const more = yield* Effect.either(driver.next(failure.value))
        if (more._tag === "Left") return yield* exit
      } else if (options?.retry?.delay !== undefined) yield* Effect.sleep(options.retry.delay)
      if (state.stopping()) return yield* endDrive(state, "shutdown")
      attempt++
      resumeFrom = Option.none()
    }
  })

const abandon = (
  state: DriveState,
  name: string,
  digest: string,
  latest: AttemptStore.Attempt,
  previousOwner: unknown
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const { attempts, journal } = state.services
    yield* flushLossy(state)
    yield* withPrelude(state, journal.transact(
      Effect.gen(function*() {
        const finished = yield* attempts.finish(
          {
            runId: state.run.runId,
            stepKeyDigest: digest,
            attempt: latest.attempt,
            state: "abandoned",
            finishedAtMs: now,
            error: { reason: "owner lost", previousOwner: previousOwner ?? null }
          } as AttemptStore.FinishAttempt,
          state.run.owner
        )
        if (finished._tag === "FenceLost" || finished._tag === "NotFound") return yield* Effect.fail(new Lost())
        yield* durable(state, "baton.step.abandoned", {
          step: name,
          attempt: latest.attempt,
          previousOwner: previousOwner ?? null
        })
      }),
      { key: state.run.runId }
    )).pipe(Effect.catchAll((e) => e instanceof Lost ? endDrive(state, "lease-lost") : failJournal(state, e)))
  })

/** `Step.checkpoint` over the drive state. */
export const checkpoint = (state: DriveState, step: Context.Tag.Service<StepContext>, value: Json): Effect.Effect<void> =>
  Effect.gen(function*() {
    const issue = jsonIssue(value, "checkpoint")
    if (issue !== undefined) {
      return yield* misuse("result_not_json", step.name, `a checkpoint of step ${step.name} is not JSON (${issue})`)
    }
    const now = yield* Clock.currentTimeMillis
    const result = yield* state.services.attempts.heartbeat(
      state.run.runId,
      stepDigest(step.name),
      step.attempt,
      state.run.owner,
      now,
      value as AttemptStore.Attempt["checkpoint"]
    ).pipe(
      Effect.catchAll((error) =>
        error.code === "invalid_attempt"
          ? misuse("result_not_json", step.name, `checkpoint of step ${step.name} refused: ${error.message}`)
          : failJournal(state, error)
      )
    )
    if (result._tag !== "Updated") return yield* endDrive(state, "lease-lost")
    yield* lossy(state, "baton.step.checkpoint", { step: step.name, attempt: step.attempt, bytes: JSON.stringify(value).length })
  })
