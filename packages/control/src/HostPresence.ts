/**
 * Host presence: each running host keeps a row naming the flows it serves and their code versions, so
 * readers (`baton doctor`, operators) see a live host even while it holds no run. A row whose `seenAtMs`
 * is older than the lease stale cutoff is not live (its host stopped refreshing it: killed, hung or cut
 * off); a host deletes its row on graceful shutdown.
 *
 * @since 0.1.0
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Consensus from "@baton/journal/Consensus"
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Option, Schema } from "effect"
import { InvalidInput, PersistenceError } from "./ControlError.js"

/**
 * A flow a host serves, with its code version (the `executionDigest` runs of it record).
 *
 * @since 0.1.0
 * @category models
 */
export interface ServedFlow {
  readonly flowId: string
  readonly version: string
}

/**
 * One host's presence row.
 *
 * @since 0.1.0
 * @category models
 */
export interface Presence {
  readonly hostId: string
  readonly pid: number
  /** The host build's incarnation: the row's key (two runtimes in one process are two rows). */
  readonly incarnation: string
  readonly flows: ReadonlyArray<ServedFlow>
  readonly startedAtMs: number
  readonly seenAtMs: number
}

/**
 * A row is live while `seenAtMs >= nowMs - staleAfterMs`: the lease stale cutoff (30 s).
 *
 * @since 0.1.0
 * @category constants
 */
export const staleAfterMs: number = Duration.toMillis(Consensus.heartbeatStaleAfter)

const ServedFlows = Schema.parseJson(Schema.Array(Schema.Struct({ flowId: Schema.String, version: Schema.String })))
const decodeFlows = Schema.decodeUnknownOption(ServedFlows)

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

const textIssue = (field: string, value: unknown): string | undefined =>
  typeof value !== "string" || value.length < 1 || value.length > 1024 || value.includes("\u0000") ||
    loneSurrogate.test(value)
    ? `${field}: must be 1 to 1024 characters without U+0000 or unpaired surrogates`
    : undefined

const timeIssue = (field: string, value: unknown): string | undefined =>
  typeof value !== "number" || !Number.isSafeInteger(value) || value < 0
    ? `${field}: must be a non-negative safe integer of milliseconds`
    : undefined

const presenceIssue = (presence: Presence): string | undefined => {
  const direct = textIssue("hostId", presence.hostId) ?? textIssue("incarnation", presence.incarnation) ??
    (typeof presence.pid !== "number" || !Number.isSafeInteger(presence.pid) || presence.pid < 1
      ? "pid: must be a safe integer of at least 1"
      : undefined) ??
    timeIssue("startedAtMs", presence.startedAtMs) ?? timeIssue("seenAtMs", presence.seenAtMs)
  if (direct !== undefined) return direct
  if (!Array.isArray(presence.flows)) return "flows: must be an array of { flowId, version }"
  for (const [index, flow] of presence.flows.entries()) {
    const issue = typeof flow !== "object" || flow === null
      ? `flows[${index}]: must be { flowId, version }`
      : textIssue(`flows[${index}].flowId`, flow.flowId) ?? textIssue(`flows[${index}].version`, flow.version)
    if (issue !== undefined) return issue
  }
  return undefined
}

const persistence = (operation: string) => (error: DurableWriter.DatabaseError | { readonly _tag: "SqlError" }) =>
  new PersistenceError({ operation, message: `database error (${DurableWriter.codeOf(error) ?? "unknown"})`, cause: error })

/**
 * Upsert this host's row (keyed by `incarnation`; `startedAtMs` is kept from the first write). With
 * `prune`, rows no longer live are deleted in the same write (a host does this at start, so rows of
 * killed hosts do not pile up). Bad input fails `InvalidInput` naming the field and writes nothing.
 *
 * @since 0.1.0
 * @category writes
 */
export const record = (
  presence: Presence,
  options: { readonly prune?: boolean } = {}
): Effect.Effect<void, InvalidInput | PersistenceError, SqlClient.SqlClient | DurableWriter.DurableWriter> =>
  Effect.gen(function*() {
    const issue = presenceIssue(presence)
    if (issue !== undefined) return yield* Effect.fail(new InvalidInput({ issue: `HostPresence.record ${issue}` }))
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter
    const flowsJson = JSON.stringify(presence.flows.map((f) => ({ flowId: f.flowId, version: f.version })))
    yield* writer.write(
      Effect.gen(function*() {
        if (options.prune === true) {
          yield* sql`DELETE FROM control_hosts WHERE seen_at_ms < ${presence.seenAtMs - staleAfterMs}`
        }
        yield* sql`INSERT INTO control_hosts (incarnation, host_id, pid, flows_json, started_at_ms, seen_at_ms)
          VALUES (${presence.incarnation}, ${presence.hostId}, ${presence.pid}, ${flowsJson}, ${presence.startedAtMs}, ${presence.seenAtMs})
          ON CONFLICT (incarnation) DO UPDATE SET flows_json = excluded.flows_json, seen_at_ms = excluded.seen_at_ms`
      }),
      { key: `control_hosts:${presence.incarnation}` }
    ).pipe(Effect.mapError(persistence("record host presence")))
  })

/**
 * Delete the row of `incarnation` (graceful shutdown); a missing row is no error.
 *
 * @since 0.1.0
 * @category writes
 */
export const remove = (
  incarnation: string
): Effect.Effect<void, InvalidInput | PersistenceError, SqlClient.SqlClient | DurableWriter.DurableWriter> =>
  Effect.gen(function*() {
    const issue = textIssue("incarnation", incarnation)
    if (issue !== undefined) return yield* Effect.fail(new InvalidInput({ issue: `HostPresence.remove ${issue}` }))
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter
    yield* writer.write(sql`DELETE FROM control_hosts WHERE incarnation = ${incarnation}`, {
      key: `control_hosts:${incarnation}`
    }).pipe(Effect.mapError(persistence("remove host presence")))
  })

interface Row {
  readonly incarnation: string
  readonly host_id: string
  readonly pid: number | string
  readonly flows_json: string
  readonly started_at_ms: number | string
  readonly seen_at_ms: number | string
}

/**
 * The live hosts as of `nowMs`, ordered by host id, pid and incarnation. A read only: `None` when the
 * database has no presence table (migrated before it existed), so callers fall back to what the runs
 * show. A row that does not decode (not written by {@link record}) is left out.
 *
 * @since 0.1.0
 * @category reads
 */
export const live = (nowMs: number): Effect.Effect<Option.Option<ReadonlyArray<Presence>>, PersistenceError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = yield* Dialect.columns(sql, "control_hosts")
    if (!columns.includes("seen_at_ms")) return Option.none()
    const rows = yield* sql<Row>`SELECT incarnation, host_id, pid, flows_json, started_at_ms, seen_at_ms FROM control_hosts
      WHERE seen_at_ms >= ${nowMs - staleAfterMs} ORDER BY host_id, pid, incarnation`
    const found: Array<Presence> = []
    for (const row of rows) {
      const flows = decodeFlows(row.flows_json)
      const pid = Number(row.pid)
      if (Option.isNone(flows) || !Number.isSafeInteger(pid)) continue
      found.push({
        hostId: row.host_id,
        pid,
        incarnation: row.incarnation,
        flows: flows.value,
        startedAtMs: Number(row.started_at_ms),
        seenAtMs: Number(row.seen_at_ms)
      })
    }
    return Option.some(found)
  }).pipe(Effect.mapError(persistence("read host presence")))
