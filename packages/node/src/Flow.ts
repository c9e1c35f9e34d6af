/**
 * Flows: a named, versioned handler over a decoded input, run by the node executor as a
 * durable run made of named steps.
 *
 * @since 0.1.0
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Control from "@baton/control/Control"
import * as ControlError from "@baton/control/ControlError"
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import * as ControlSchema from "@baton/control/ControlSchema"
import * as Journal from "@baton/journal/Journal"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Chunk, Clock, Data, Duration, Effect, Option, Queue, Schedule, Schema } from "effect"
import * as crypto from "node:crypto"
import { isJson, jsonIssue, parseIssue, withoutUndefined } from "./internal/executorJson.js"
import type { Run } from "./Run.js"

/**
 * The services a handler may use without providing them: the drive's `Run`, the runtime's
 * `SqlClient` (reads; writes belong in a step's `commit`), `FileSystem` and `Path`.
 *
 * @since 0.1.0
 * @category models
 */
export type Services = Run | SqlClient.SqlClient | FileSystem.FileSystem | Path.Path

/**
 * What a flow author writes.
 * - `id`: `/^[a-z0-9][a-z0-9._\/-]{0,127}$/`;
 * - `description`: 1..1000 characters;
 * - `input`: decodes the run input; its encoded side must be JSON;
 * - `output`: encodes the result (default: the result must itself be JSON);
 * - `version`: the flow's code identity (1..128 characters); recommended, change it whenever the
 *   steps or their meaning change;
 * - `capabilities`, `budget`, `deployClass`: the plan envelope;
 * - `approval` (since 0.2.0): `"required"` keeps plan → approve → run as the only way to start a
 *   run; the default `"none"` lets {@link start} create runs directly;
 * - `error` (since 0.2.0): encodes the handler's typed failure into the run's history, so
 *   {@link await} answers it decoded;
 * - `retry` (since 0.2.0): the default {@link Retry} policy of runs started by {@link start}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Definition<I, IE, A, AE, E, R extends Services> {
  readonly id: string
  readonly description: string
  readonly input: Schema.Schema<I, IE>
  readonly output?: Schema.Schema<A, AE>
  readonly version?: string
  readonly capabilities?: ReadonlyArray<string>
  readonly budget?: ControlSchema.Budget
  readonly deployClass?: boolean
  readonly approval?: "required" | "none"
  readonly error?: Schema.Schema<E, any>
  readonly retry?: Retry
  readonly handler: (input: I) => Effect.Effect<A, E, R>
}

/**
 * A flow the runtime can serve. Type parameters: decoded input, result, handler error.
 *
 * @since 0.1.0
 * @category models
 */
export interface Flow<I, A, E> {
  readonly _tag: "@baton/node/Flow"
  readonly id: string
  readonly description: string
  readonly input: Schema.Schema<I, any>
  /**
   * The result's schema, type-erased like `error`: `Schema` is invariant, so a flow that never
   * succeeds (`A = never`) would otherwise not fit a catalog of `Any`.
   */
  readonly output: Schema.Schema<any, any> | undefined
  readonly version: string | undefined
  readonly capabilities: ReadonlyArray<string>
  readonly budget: ControlSchema.Budget | undefined
  readonly deployClass: boolean
  readonly approval: "required" | "none"
  /** The handler's failure schema (type-erased: `Schema` is invariant in its type). */
  readonly error: Schema.Schema<any, any> | undefined
  readonly retry: Retry | undefined
  readonly handler: (input: I) => Effect.Effect<A, E, Services>
}

/**
 * Any flow, for catalogs.
 *
 * @since 0.1.0
 * @category models
 */
export type Any = Flow<any, any, any>

/**
 * Build a flow. Nothing is validated here: NodeRuntime validates the catalog when it builds
 * (ids, versions, duplicates), so a bad catalog fails the layer naming the flow.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <I, IE, A, AE, E, R extends Services>(
  definition: Definition<I, IE, A, AE, E, R>
): Flow<I, A, E> => ({
  _tag: "@baton/node/Flow",
  id: definition.id,
  description: definition.description,
  input: definition.input,
  output: definition.output,
  version: definition.version,
  capabilities: definition.capabilities ?? [],
  budget: definition.budget,
  deployClass: definition.deployClass ?? false,
  approval: definition.approval ?? "none",
  error: definition.error,
  retry: definition.retry,
  handler: definition.handler as (input: I) => Effect.Effect<A, E, Services>
})

const idPattern = /^[a-z0-9][a-z0-9._/-]{0,127}$/

/**
 * Why a flow cannot be served, or `undefined`: the rule broken by its id, description or
 * version (the message names the field).
 *
 * @since 0.1.0
 * @category validation
 */
export const issue = (flow: Any): { readonly field: string; readonly message: string } | undefined => {
  if (typeof flow.id !== "string" || !idPattern.test(flow.id)) {
    return { field: "id", message: "must match /^[a-z0-9][a-z0-9._\\/-]{0,127}$/" }
  }
  if (typeof flow.description !== "string" || flow.description.length < 1 || flow.description.length > 1000) {
    return { field: "description", message: "must be 1..1000 characters" }
  }
  if (flow.version !== undefined) {
    if (
      typeof flow.version !== "string" || flow.version.length < 1 || flow.version.length > 128 ||
      flow.version.includes("\u0000") || !wellFormed(flow.version)
    ) {
      return { field: "version", message: "must be 1..128 characters without U+0000 or unpaired surrogates" }
    }
  }
  return undefined
}

const wellFormed = (value: string): boolean => {
  try {
    encodeURIComponent(value)
    return true
  } catch {
    return false
  }
}

/**
 * The flow's code identity: `version` verbatim when given, else `"src:"` + hex sha256 of the
 * handler's source text (so editing the handler is drift; editing a helper it calls is not).
 *
 * @since 0.1.0
 * @category accessors
 */
export const codeIdentity = (flow: Any): string =>
  flow.version ?? `src:${crypto.createHash("sha256").update(Function.prototype.toString.call(flow.handler)).digest("hex")}`

const issueOf = parseIssue

/**
 * Decode a run input with the flow's schema, then encode it back: control stores the encoded
 * JSON form, so transforms run once at plan time. Failure → `InvalidInput` naming the path.
 *
 * @since 0.1.0
 * @category codecs
 */
export const normalizeInput = (flow: Any, input: unknown): Effect.Effect<unknown, ControlError.InvalidInput> =>
  Schema.decodeUnknown(flow.input)(input).pipe(
    Effect.flatMap(Schema.encode(flow.input)),
    Effect.mapError((error) => new ControlError.InvalidInput({ issue: issueOf("input", error) })),
    Effect.map(withoutUndefined),
    Effect.filterOrFail(
      (encoded) => isJson(encoded),
      (encoded) => new ControlError.InvalidInput({ issue: jsonIssue(encoded, "input") ?? "input: is not JSON" })
    )
  )

/**
 * Map a flow to control's `DurableFlow`: envelope `{ capabilities: sorted unique, flows: [id],
 * budget: budget ?? {} }`, `executionDigest` = {@link codeIdentity}, `decode` = {@link normalizeInput}.
 *
 * @since 0.1.0
 * @category conversions
 */
export const toDurableFlow = (flow: Any): ControlRuntime.DurableFlow => ({
  flowId: flow.id,
  description: flow.description,
  deployClass: flow.deployClass,
  envelope: {
    capabilities: Array.from(new Set(flow.capabilities)).sort(),
    flows: [flow.id],
    budget: flow.budget ?? {}
  },
  executionDigest: codeIdentity(flow),
  approval: flow.approval,
  decode: (input: unknown) => normalizeInput(flow, input)
})

// ---------------------------------------------------------------------------------------------
// start and await

/**
 * A run-level retry policy: at most `maxAttempts` attempts in all (1..1000; 1 = no retry). Between
 * attempts the run waits in its queue, released, for the delay of {@link retrySchedule}: exponential
 * from `initial` (default 1 s) by `factor` (default 2), capped at `max` (default 5 min), jittered
 * (default true). Completed steps are not run again.
 *
 * @since 0.2.0
 * @category models
 */
export interface Retry {
  readonly maxAttempts: number
  readonly initial?: Duration.DurationInput
  readonly factor?: number
  readonly max?: Duration.DurationInput
  readonly jitter?: boolean
}

/**
 * The durable form of a {@link Retry} (milliseconds), as stored with the run.
 *
 * @since 0.2.0
 * @category conversions
 */
export const retryPolicy = (retry: Retry): ControlRuntime.RetryPolicy => ({
  maxAttempts: retry.maxAttempts,
  initialDelayMs: millisOf(retry.initial ?? "1 second"),
  factor: retry.factor ?? 2,
  maxDelayMs: millisOf(retry.max ?? "5 minutes"),
  jitter: retry.jitter ?? true
})

/** Whole milliseconds of a finite, non-negative duration, else NaN (which the start refuses by field). */
const millisOf = (input: unknown): number => {
  // `Duration` reads a negative or NaN number as zero; a delay that says so is refused instead.
  if (typeof input === "number" && !(input >= 0)) return Number.NaN
  if (typeof input === "string" && /^\s*-/.test(input)) return Number.NaN
  const decoded = Duration.decodeUnknown(input)
  if (Option.isNone(decoded) || !Duration.isFinite(decoded.value)) return Number.NaN
  const ms = Duration.toMillis(decoded.value)
  return ms >= 0 ? Math.round(ms) : Number.NaN
}

/**
 * The `Schedule` of a retry policy (a {@link Retry} or its stored form): it recurs `maxAttempts - 1` times, each output being the
 * delay before the next attempt (exponential, capped, and with jitter scaled by a random factor in
 * [0.5, 1.5)). {@link retryDelay} steps it without sleeping.
 *
 * @since 0.2.0
 * @category conversions
 */
export const retrySchedule = (retry: Retry | ControlRuntime.RetryPolicy): Schedule.Schedule<Duration.Duration> => {
  // Either shape: a flow's `Retry` (durations) or the stored policy (milliseconds).
  const policy = "initialDelayMs" in retry ? retry : retryPolicy(retry)
  const cap = Duration.millis(policy.maxDelayMs)
  const capped = Schedule.exponential(Duration.millis(policy.initialDelayMs), policy.factor).pipe(
    Schedule.modifyDelay((_, delay) => Duration.min(delay, cap))
  )
  const jittered = policy.jitter ? Schedule.jitteredWith(capped, { min: 0.5, max: 1.5 }) : capped
  return Schedule.delays(Schedule.intersect(jittered, Schedule.recurs(policy.maxAttempts - 1)))
}

/**
 * The delay before attempt `failedAttempts + 1` under `policy`, or `None` when the attempts are spent.
 * Steps {@link retrySchedule} from `nowMs` without sleeping.
 *
 * @since 0.2.0
 * @category conversions
 */
export const retryDelay = (
  policy: ControlRuntime.RetryPolicy,
  failedAttempts: number,
  nowMs: number
): Effect.Effect<Option.Option<Duration.Duration>> =>
  failedAttempts >= policy.maxAttempts
    ? Effect.succeedNone
    : Effect.map(
      Schedule.run(retrySchedule(policy), nowMs, Array.from({ length: failedAttempts }, () => undefined)),
      (delays) => Chunk.get(delays, failedAttempts - 1)
    )

/**
 * Options of {@link start} and {@link startMany}: `idempotencyKey` (start only; the same key and input
 * answer the same run, other input fails `IdempotencyConflict`), `queue` (default `"default"`),
 * `priority` (integer, higher claimed first), `availableAt` (a `Date` or epoch ms) or `delay` (from
 * now), `retry` (default the flow's), `parentRunId`.
 *
 * @since 0.2.0
 * @category models
 */
export interface StartOptions {
  readonly idempotencyKey?: string
  readonly queue?: string
  readonly priority?: number
  readonly availableAt?: Date | number
  readonly delay?: Duration.DurationInput
  readonly retry?: Retry
  readonly parentRunId?: string
}

/**
 * A started run of a flow: its `runId`, and `created` (false when an idempotency key named an earlier
 * run). Pass it to {@link await}.
 *
 * @since 0.2.0
 * @category models
 */
export interface Handle<A, E> {
  readonly _tag: "@baton/node/Flow/Handle"
  readonly runId: string
  readonly flowId: string
  readonly created: boolean
  readonly flow: Flow<any, A, E>
}

/**
 * How a run ended: `Completed { value }` (decoded by the flow's `output` schema when it has one),
 * `Failed { error }` (the handler's failure decoded by the flow's `error` schema when it has one, else
 * the recorded `{ tag?, message }`), `Cancelled { attribution }` (who asked, when, why).
 *
 * @since 0.2.0
 * @category models
 */
export type Outcome<A, E> = Data.TaggedEnum<{
  Completed: { readonly runId: string; readonly value: A }
  Failed: { readonly runId: string; readonly error: E | RecordedError }
  Cancelled: { readonly runId: string; readonly attribution: ControlSchema.Cancellation | undefined }
}>

/**
 * A failure as the run's history holds it when no `error` schema decodes it.
 *
 * @since 0.2.0
 * @category models
 */
export interface RecordedError {
  readonly tag?: string
  readonly message: string
  readonly [key: string]: unknown
}

interface OutcomeDefinition extends Data.TaggedEnum.WithGenerics<2> {
  readonly taggedEnum: Outcome<this["A"], this["B"]>
}

/**
 * Constructors, `$is` and `$match` of {@link Outcome}.
 *
 * @since 0.2.0
 * @category constructors
 */
export const Outcome = Data.taggedEnum<OutcomeDefinition>()

/**
 * Why {@link await} gave up: the run did not end within `timeout`. Nothing changed.
 *
 * @since 0.2.0
 * @category errors
 */
export class AwaitTimeout extends Schema.TaggedError<AwaitTimeout>()("AwaitTimeout", {
  runId: Schema.String,
  timeoutMs: Schema.Number
}) {
  override get message() {
    return `run ${this.runId} did not end within ${this.timeoutMs} ms`
  }
}

const availableAtOf = (options: StartOptions | undefined): Effect.Effect<number | undefined, ControlError.InvalidInput> =>
  Effect.gen(function*() {
    if (options?.availableAt !== undefined && options.delay !== undefined) {
      return yield* new ControlError.InvalidInput({ issue: "availableAt: give either availableAt or delay, not both" })
    }
    if (options?.availableAt !== undefined) {
      const at = options.availableAt instanceof Date ? options.availableAt.getTime() : options.availableAt
      if (!Number.isSafeInteger(at) || at < 0) {
        return yield* new ControlError.InvalidInput({ issue: "availableAt: must be a valid Date or non-negative epoch milliseconds" })
      }
      return at
    }
    if (options?.delay !== undefined) {
      const ms = millisOf(options.delay)
      if (Number.isNaN(ms)) return yield* new ControlError.InvalidInput({ issue: "delay: must be a finite, non-negative duration" })
      return (yield* Clock.currentTimeMillis) + ms
    }
    return undefined
  })

/** Encode a typed input with the flow's schema: control decodes the encoded form. */
const encodeInput = <I>(flow: Flow<I, any, any>, input: I, field: string) =>
  Effect.suspend(() => Schema.encode(flow.input)(input)).pipe(
    Effect.mapError((error) => new ControlError.InvalidInput({ issue: issueOf(field, error) })),
    Effect.map(withoutUndefined),
    Effect.filterOrFail(
      (encoded) => isJson(encoded),
      (encoded) => new ControlError.InvalidInput({ issue: jsonIssue(encoded, field) ?? `${field}: is not JSON` })
    ),
    // Encoding reads the input: a getter or proxy trap that throws (or a transformation that does) is the
    // caller's input refused, not a defect; what it threw is not repeated, as it may hold the value.
    Effect.catchAllDefect(() =>
      Effect.fail(new ControlError.InvalidInput({ issue: `${field}: could not be read (reading it threw)` }))
    )
  )

const startOptions = (flow: Any, options: StartOptions | undefined) =>
  Effect.flatMap(availableAtOf(options), (availableAt) => {
    const retry = options?.retry ?? flow.retry
    // A run's retry is stored with it, so it is a policy of numbers; a Schedule (code) cannot be.
    if (Schedule.isSchedule(retry)) {
      return Effect.fail(
        new ControlError.InvalidInput({
          issue: "retry: must be a retry policy { maxAttempts, initial?, factor?, max?, jitter? }, not a Schedule (a run's retry is stored with it)"
        })
      )
    }
    return Effect.succeed({
      ...(options?.queue === undefined ? {} : { queue: options.queue }),
      ...(options?.priority === undefined ? {} : { priority: options.priority }),
      ...(availableAt === undefined ? {} : { availableAt }),
      ...(retry === undefined ? {} : { retry: retryPolicy(retry) }),
      ...(options?.parentRunId === undefined ? {} : { parentRunId: options.parentRunId })
    })
  })

const handleOf = <A, E>(flow: Flow<any, A, E>, started: Control.Started): Handle<A, E> => ({
  _tag: "@baton/node/Flow/Handle",
  runId: started.runId,
  flowId: flow.id,
  created: started.created,
  flow
})

/**
 * Start one run of `flow` in one durable transaction: the input is checked by the flow's schema
 * first (nothing is written when it fails). A run available now starts at once on this process's
 * host when it has room; otherwise it waits in its queue for any host's claim. Fails
 * `ApprovalRequired` for a flow whose policy is `approval: "required"`, `IdempotencyConflict` for a
 * key reused with other input, `InvalidInput` naming the field and rule.
 *
 * @since 0.2.0
 * @category start
 */
export const start = <I, A, E>(
  flow: Flow<I, A, E>,
  input: I,
  options?: StartOptions
): Effect.Effect<Handle<A, E>, Control.StartError, Control.Control> =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const encoded = yield* encodeInput(flow, input, "input")
    const started = yield* control.start({
      flowId: flow.id,
      input: encoded,
      ...(options?.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
      ...(yield* startOptions(flow, options))
    })
    return handleOf(flow, started)
  })

/**
 * Start many runs of `flow` in one transaction (all or none), waiting in their queue for the claim
 * of whichever hosts have room. Every input is checked first (`InvalidInput` names `inputs[i]`).
 * `idempotencyKey` is not accepted here; give `idempotencyKeys` (one per input, or `undefined`).
 *
 * @since 0.2.0
 * @category start
 */
export const startMany = <I, A, E>(
  flow: Flow<I, A, E>,
  inputs: Iterable<I>,
  options?: Omit<StartOptions, "idempotencyKey"> & { readonly idempotencyKeys?: ReadonlyArray<string | undefined> }
): Effect.Effect<ReadonlyArray<Handle<A, E>>, Control.StartError, Control.Control> =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    if (inputs === null || typeof inputs !== "object" || typeof (inputs as any)[Symbol.iterator] !== "function") {
      return yield* new ControlError.InvalidInput({ issue: "inputs: must be an iterable of inputs" })
    }
    if (options !== undefined && (options as { readonly idempotencyKey?: unknown }).idempotencyKey !== undefined) {
      return yield* new ControlError.InvalidInput({
        issue: "idempotencyKey: is not accepted by startMany; give idempotencyKeys, one per input"
      })
    }
    const list = Array.from(inputs)
    const encoded = yield* Effect.forEach(list, (input, i) => encodeInput(flow, input, `inputs[${i}]`))
    const started = yield* control.startMany({
      flowId: flow.id,
      inputs: encoded,
      ...(options?.idempotencyKeys === undefined ? {} : { idempotencyKeys: options.idempotencyKeys }),
      ...(yield* startOptions(flow, options))
    })
    return started.map((run) => handleOf(flow, run))
  })

/**
 * Options of {@link await}: `timeout` (fail `AwaitTimeout`; default none), `pollInterval` (the
 * longest wait between reads when the run ends in another process; default 1 s, first reads sooner).
 *
 * @since 0.2.0
 * @category models
 */
export interface AwaitOptions {
  readonly timeout?: Duration.DurationInput
  readonly pollInterval?: Duration.DurationInput
}

const outcomeOf = <A, E>(
  flow: Flow<any, A, E> | undefined,
  summary: ControlSchema.RunSummary
): Effect.Effect<Outcome<A, E>, ControlError.PersistenceError> =>
  Effect.gen(function*() {
    const runId = summary.runId
    if (summary.status === "cancelled") return Outcome.Cancelled({ runId, attribution: summary.cancellation })
    if (summary.status === "completed") {
      const raw = summary.result
      if (flow?.output === undefined) return Outcome.Completed({ runId, value: raw as A })
      const value = yield* Schema.decodeUnknown(flow.output)(raw).pipe(
        Effect.mapError(() =>
          new ControlError.PersistenceError({ operation: "await a run", message: `run ${runId}: result does not decode with the flow's output schema` })
        )
      )
      return Outcome.Completed({ runId, value })
    }
    const recorded = (summary.error ?? { message: "the run failed" }) as RecordedError
    if (flow?.error !== undefined && "value" in recorded) {
      const decoded = yield* Effect.either(Schema.decodeUnknown(flow.error)(recorded["value"]))
      if (decoded._tag === "Right") return Outcome.Failed({ runId, error: decoded.right })
    }
    return Outcome.Failed({ runId, error: recorded })
  })

/** A finite duration option of at least `minMs` milliseconds, or `InvalidInput` naming it. */
const durationOption = (field: string, input: unknown, minMs: number): Effect.Effect<number, ControlError.InvalidInput> => {
  // A negative number or text decodes to a zero Duration: refused before it is decoded.
  const negative = (typeof input === "number" && !(input >= 0)) || (typeof input === "bigint" && input < 0n) ||
    (typeof input === "string" && input.trim().startsWith("-"))
  const decoded = negative ? Option.none() : Duration.decodeUnknown(input)
  const ms = Option.isSome(decoded) && Duration.isFinite(decoded.value) ? Duration.toMillis(decoded.value) : Number.NaN
  return Number.isFinite(ms) && ms >= minMs
    ? Effect.succeed(ms)
    : Effect.fail(new ControlError.InvalidInput({ issue: `${field}: must be a finite duration of at least ${minMs} ms` }))
}

/**
 * Entry types that may close a run's stream (`baton.run.completed`, `control.run.cancelled`, …): only these
 * wake an await to read the run again; a step's entries do not. An end written under another type is still
 * seen by the next poll.
 */
const ending = (eventType: string): boolean =>
  eventType.endsWith(".completed") || eventType.endsWith(".failed") || eventType.endsWith(".cancelled")

/**
 * Wait for a run to end and answer its {@link Outcome}. It wakes on the run's terminal write in this
 * process (the journal's commit feed) and otherwise reads again at growing intervals up to
 * `pollInterval`. Fails `RunNotFound`, `InvalidInput` (a malformed run id, a `timeout` or
 * `pollInterval` that is not a finite duration, negative or zero respectively), `AwaitTimeout`.
 *
 * @since 0.2.0
 * @category start
 */
export const await_ = <A = unknown, E = unknown>(
  handle: Handle<A, E> | string,
  options?: AwaitOptions
): Effect.Effect<
  Outcome<A, E>,
  ControlError.RunNotFound | ControlError.InvalidInput | ControlError.PersistenceError | AwaitTimeout,
  Control.Control
> =>
  Effect.scoped(Effect.gen(function*() {
    const control = yield* Control.Control
    const timeoutMs = options?.timeout === undefined ? undefined : yield* durationOption("timeout", options.timeout, 0)
    const pollMs = yield* durationOption("pollInterval", options?.pollInterval ?? "1 second", 1)
    const runId = typeof handle === "string" ? handle : handle.runId
    const flow = typeof handle === "string" ? undefined : handle.flow
    const journal = yield* Effect.serviceOption(Journal.Journal)
    // Subscribed before the first read, so an end committed between the read and the wait still wakes it.
    const changes = journal._tag === "Some" ? yield* journal.value.changes : undefined
    const maxMs = Math.max(10, pollMs)
    const wait = (ms: number) =>
      changes === undefined
        ? Effect.sleep(Duration.millis(ms))
        : Effect.raceFirst(
          Effect.sleep(Duration.millis(ms)),
          Effect.iterate(false, {
            while: (seen) => !seen,
            body: () => Effect.map(Queue.takeBetween(changes, 1, 4096), (batch) => Chunk.some(batch, (e) => e.runId === runId && ending(e.eventType)))
          })
        )
    // A read refused for contention (a pool with no free connection in time) is read again, later.
    const contended = (error: { readonly _tag: string }) =>
      error._tag === "PersistenceError" && DurableWriter.codeOf(error) === "busy"
    const read = control.getRun(runId).pipe(
      Effect.retry({
        schedule: Schedule.exponential(Duration.millis(20)).pipe(
          Schedule.modifyDelay((_, delay) => Duration.min(delay, Duration.millis(maxMs))),
          Schedule.jittered
        ),
        while: contended
      })
    )
    const loop = Effect.gen(function*() {
      let delay = 10
      for (;;) {
        const summary = yield* read
        if (ControlSchema.isTerminalStatus(summary.status)) return yield* outcomeOf(flow, summary)
        yield* wait(delay)
        delay = Math.min(maxMs, delay * 2)
      }
    })
    if (timeoutMs === undefined) return yield* loop
    // A run that has ended answers whatever the timeout (also 0: "look, do not wait").
    // Read once outside the timeout (an ended run answers even at 0); a contended read waits under it.
    const first = yield* control.getRun(runId).pipe(
      Effect.map(Option.some),
      Effect.catchIf(contended, () => Effect.succeedNone)
    )
    if (Option.isSome(first) && ControlSchema.isTerminalStatus(first.value.status)) return yield* outcomeOf(flow, first.value)
    return yield* loop.pipe(
      Effect.timeoutFail({ duration: Duration.millis(timeoutMs), onTimeout: () => new AwaitTimeout({ runId, timeoutMs }) })
    )
  }))

export {
  /**
   * Wait for a run to end: see {@link await_}.
   *
   * @since 0.2.0
   * @category start
   */
  await_ as await
}
