/** Validation of NodeRuntime options: before anything opens, naming field and rule. */
import type * as ApprovalAuthority from "@baton/control/ApprovalAuthority"
import type * as ControlError from "@baton/control/ControlError"
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as ControlMigrations from "@baton/control/Migrations"
import * as Queues from "@baton/control/Queues"
import * as Consensus from "@baton/journal/Consensus"
import * as JournalMigrations from "@baton/journal/Migrations"
import type * as SqlJournal from "@baton/journal/SqlJournal"
import * as RunStoreMigrations from "@baton/run-store/Migrations"
import type * as Ownership from "@baton/run-store/Ownership"
import { Duration, Effect } from "effect"
import * as Flow from "../Flow.js"
import { NodeRuntimeError } from "./runtimeError.js"

/** NodeRuntime options. */
export interface Options {
  readonly filename?: string
  readonly mode?: "host" | "client"
  readonly readOnly?: boolean
  readonly flows?: ReadonlyArray<Flow.Any>
  readonly loadFlows?: () => Effect.Effect<ReadonlyArray<Flow.Any>, ControlError.PersistenceError>
  readonly migrations?: ReadonlyArray<Migrations.MigrationSet>
  readonly hostId?: string
  /** Overrides the identity's pid (simulating a restarted container with the same pid; tests). */
  readonly pid?: number
  readonly principal?: { readonly id: string; readonly kind: string }
  readonly approvalAuthority?: ApprovalAuthority.Service
  readonly liveness?: Ownership.LivenessCheck
  readonly takeOverHungOwnersAfter?: Duration.DurationInput
  readonly maxRuns?: number
  /** Per-host limits by queue name: this host drives at most `concurrency` runs of that queue at once. */
  readonly queues?: { readonly [queue: string]: { readonly concurrency: number } }
  readonly pollInterval?: Duration.DurationInput
  readonly shutdownGrace?: Duration.DurationInput
  readonly drainTimeout?: Duration.DurationInput
  readonly writer?: DurableWriter.WriteRetryOptions
  readonly journal?: SqlJournal.SqlJournalOptions
}

/** Options after validation, with defaults applied. */
export interface Validated {
  readonly mode: "host" | "client"
  readonly readOnly: boolean
  readonly flows: ReadonlyArray<Flow.Any>
  readonly maxRuns: number
  /** Per-host limits: queue name → at most this many drives here. */
  readonly queueLimits: ReadonlyMap<string, number>
  readonly pollIntervalMs: number
  readonly shutdownGraceMs: number
  readonly drainTimeoutMs: number
  readonly takeOverHungOwnersAfterMs: number | undefined
  readonly migrations: ReadonlyArray<Migrations.MigrationSet>
}

const fail = (field: string, message: string, reason: NodeRuntimeError["reason"] = "invalid_options") =>
  Effect.fail(new NodeRuntimeError({ reason, field, message: `${field}: ${message}` }))

const millis = (field: string, input: Duration.DurationInput | undefined, fallback: number) => {
  if (input === undefined) return Effect.succeed(fallback)
  try {
    const ms = Duration.toMillis(Duration.decode(input))
    return Number.isFinite(ms) && ms >= 0 ? Effect.succeed(ms) : fail(field, "must be a finite, non-negative duration")
  } catch {
    return fail(field, "must be a duration such as \"5 seconds\"")
  }
}

/** Catalog rules: every flow valid (field `flows[i].<field>`), ids unique (`duplicate_flow`). */
export const validateCatalog = (flows: ReadonlyArray<Flow.Any>, field = "flows") =>
  Effect.gen(function*() {
    // Catalogs also come from user modules (`--config`), so the shapes are checked, not assumed.
    if (!Array.isArray(flows)) return yield* fail(field, "must be an array of flows made with Flow.make")
    const seen = new Set<string>()
    for (const [index, flow] of flows.entries()) {
      if (typeof flow !== "object" || flow === null || typeof flow.handler !== "function") {
        return yield* fail(`${field}[${index}]`, "must be a flow made with Flow.make")
      }
      const issue = Flow.issue(flow)
      if (issue !== undefined) return yield* fail(`${field}[${index}].${issue.field}`, issue.message)
      if (seen.has(flow.id)) {
        return yield* fail(`${field}[${index}].id`, `flow id ${flow.id} appears twice; flow ids must be unique`, "duplicate_flow")
      }
      seen.add(flow.id)
    }
    return flows
  })

/** The library migration sets every Baton database composes, before the application's. */
export const librarySets: ReadonlyArray<Migrations.MigrationSet> = [
  JournalMigrations.set,
  RunStoreMigrations.set,
  ControlMigrations.set
]

/**
 * Application migration sets: an array of sets, each with an `idOffset` of 10000 or more (below is
 * the libraries' range) and otherwise valid by `Migrations.validate` composed after the library sets
 * and the sets before it (unique namespace and offset, `"<1..999>_<name>"` keys naming Effects). Checked
 * before anything opens, so a set the ledger would refuse creates no database file.
 */
export const validateMigrations = (migrations: ReadonlyArray<Migrations.MigrationSet>) =>
  Effect.gen(function*() {
    if (!Array.isArray(migrations)) return yield* fail("migrations", "must be an array of migration sets")
    for (const [index, set] of migrations.entries()) {
      if (typeof set !== "object" || set === null) return yield* fail(`migrations[${index}]`, "must be a migration set")
      if (!Number.isSafeInteger(set.idOffset) || set.idOffset < 10_000) {
        return yield* fail(`migrations[${index}].idOffset`, "application migration sets must use an idOffset of 10000 or more")
      }
      const refused = Migrations.validate([...librarySets, ...migrations.slice(0, index + 1)])
      if (refused !== undefined) return yield* fail(`migrations[${index}]`, refused.message)
    }
    return migrations
  })

/** PostgreSQL-only options, checked before the pool opens. */
export interface PgExtras {
  readonly maxConnections?: number
  readonly clockSync?: Duration.DurationInput
}

/** The shortest re-anchor period: each re-anchor is a round trip to the server. */
export const minClockSyncMs = 1000

/**
 * `maxConnections` a positive safe integer; `clockSync` a duration of at least one second (zero
 * would re-anchor in a busy loop).
 */
export const validatePg = (options: PgExtras) =>
  Effect.gen(function*() {
    const max = options.maxConnections
    if (max !== undefined && (!Number.isSafeInteger(max) || max < 1)) {
      return yield* fail("maxConnections", "must be a positive safe integer (the pool size)")
    }
    if (options.clockSync !== undefined) {
      const ms = yield* millis("clockSync", options.clockSync, 0)
      if (ms < minClockSyncMs) return yield* fail("clockSync", `must be at least ${minClockSyncMs / 1000} second`)
    }
  })

/**
 * Per-host queue limits: an object whose keys are queue names (`Queues.namePattern`) and whose values
 * are `{ concurrency }`, an integer between 1 and 1024. Fields `queues`, `queues.<name>`,
 * `queues.<name>.concurrency`.
 */
export const validateQueues = (queues: Options["queues"]) =>
  Effect.gen(function*() {
    const limits = new Map<string, number>()
    if (queues === undefined) return limits
    if (typeof queues !== "object" || queues === null || Array.isArray(queues)) {
      return yield* fail("queues", "must be an object { [queue]: { concurrency } }")
    }
    for (const [queue, limit] of Object.entries(queues)) {
      if (!Queues.namePattern.test(queue)) {
        return yield* fail(`queues.${JSON.stringify(queue)}`, "queue names must match /^[a-z0-9][a-z0-9._\\/-]{0,127}$/")
      }
      if (typeof limit !== "object" || limit === null) return yield* fail(`queues.${queue}`, "must be { concurrency }")
      const n = limit.concurrency
      if (!Number.isSafeInteger(n) || n < 1 || n > 1024) {
        return yield* fail(`queues.${queue}.concurrency`, "must be an integer between 1 and 1024")
      }
      limits.set(queue, n)
    }
    return limits
  })

/** The default principal, when given: `{ id, kind }`, both non-empty strings. */
export const validatePrincipal = (principal: Options["principal"]) => {
  if (principal === undefined) return Effect.void
  if (typeof principal !== "object" || principal === null) return fail("principal", "must be an object { id, kind }")
  const { id, kind } = principal
  return typeof id !== "string" || id.length === 0 || typeof kind !== "string" || kind.length === 0
    ? fail("principal", "id and kind must be non-empty strings")
    : Effect.void
}

export const validate = (options: Options & PgExtras): Effect.Effect<Validated, NodeRuntimeError> =>
  Effect.gen(function*() {
    yield* validatePg(options)
    const mode = options.mode ?? "host"
    if (mode !== "host" && mode !== "client") return yield* fail("mode", "must be \"host\" or \"client\"")
    const readOnly = options.readOnly ?? false
    if (mode === "host" && readOnly) {
      return yield* fail("readOnly", "a host drives runs and cannot open the database read-only; use mode \"client\"", "read_only_host")
    }
    const maxRuns = options.maxRuns ?? 4
    if (!Number.isSafeInteger(maxRuns) || maxRuns < 1 || maxRuns > 1024) {
      return yield* fail("maxRuns", "must be an integer between 1 and 1024")
    }
    const queueLimits = yield* validateQueues(options.queues)
    const pollIntervalMs = yield* millis("pollInterval", options.pollInterval, 1000)
    if (pollIntervalMs < 100 || pollIntervalMs > 10_000) {
      return yield* fail("pollInterval", "must be between 100 milliseconds and 10 seconds")
    }
    const shutdownGraceMs = yield* millis("shutdownGrace", options.shutdownGrace, 10_000)
    if (shutdownGraceMs > 60_000) return yield* fail("shutdownGrace", "must be at most 60 seconds")
    const drainTimeoutMs = yield* millis("drainTimeout", options.drainTimeout, Math.min(5000, shutdownGraceMs / 2))
    if (drainTimeoutMs >= shutdownGraceMs) return yield* fail("drainTimeout", "must be shorter than shutdownGrace")
    let takeOverHungOwnersAfterMs: number | undefined
    if (options.takeOverHungOwnersAfter !== undefined) {
      takeOverHungOwnersAfterMs = yield* millis("takeOverHungOwnersAfter", options.takeOverHungOwnersAfter, 0)
      const minimum = 2 * Duration.toMillis(Consensus.heartbeatStaleAfter)
      if (takeOverHungOwnersAfterMs < minimum) {
        return yield* fail("takeOverHungOwnersAfter", `must be at least ${minimum / 1000} seconds (twice the stale-after)`)
      }
    }
    const migrations = yield* validateMigrations(options.migrations ?? [])
    const flows = yield* validateCatalog(options.flows ?? [])
    yield* validatePrincipal(options.principal)
    return {
      mode,
      readOnly,
      flows,
      maxRuns,
      queueLimits,
      pollIntervalMs,
      shutdownGraceMs,
      drainTimeoutMs,
      takeOverHungOwnersAfterMs,
      migrations
    }
  })
