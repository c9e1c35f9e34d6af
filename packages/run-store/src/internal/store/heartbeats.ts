/**
 * Batched heartbeats: every listed lease renewed by one statement per chunk of
 * at most 1,000 runs, its outcome read from what that statement returns.
 */
import { Effect, Metric } from "effect"
import * as RunStoreMetrics from "../../RunStoreMetrics.js"
import * as Admission from "../Admission.js"
import * as Boundary from "../Boundary.js"
import * as Errors from "../errors.js"
import type { HeartbeatOutcome, OwnerIdType, RunLease, RunStoreError, Service } from "../model.js"
import * as ReferenceClock from "../ReferenceClock.js"
import { admit, operation, readingAdmitted, statement, type StoreContext, write } from "./context.js"

/** Most runs one statement renews: larger batches are split into chunks of this size. */
export const chunkSize = 1_000

const updated = (heartbeatAtMs: number): HeartbeatOutcome => ({ _tag: "Updated", heartbeatAtMs })
const fenceLost: HeartbeatOutcome = Object.freeze({ _tag: "FenceLost" })
const notFound: HeartbeatOutcome = Object.freeze({ _tag: "NotFound" })

/** One key per (run, owner): the same run listed for two owners is two leases. */
const leaseKey = (runId: string, hostId: string, pid: number, nonce: string) =>
  JSON.stringify([runId, hostId, pid, nonce])
const keyOf = (lease: RunLease) => leaseKey(lease.runId, lease.owner.hostId, lease.owner.pid, lease.owner.nonce)

interface Returned {
  readonly run_id: string
  readonly owner_host_id: string
  readonly owner_pid: number | string
  readonly owner_nonce: string
  readonly heartbeat_at_ms: number | string
}

interface Present {
  readonly run_id: string
  readonly status: string
  readonly owner_host_id: string | null
  readonly owner_pid: number | string | null
  readonly owner_nonce: string | null
}

const returnedKey = (row: Returned | Present) =>
  leaseKey(row.run_id, row.owner_host_id ?? "", Number(row.owner_pid), row.owner_nonce ?? "")

type Method = "heartbeatMany" | "heartbeatLeases"

export const make = (
  ctx: StoreContext,
  heartbeat: Service["heartbeat"]
): Pick<Service, "heartbeatMany" | "heartbeatLeases"> => {
  const { sql } = ctx
  const clockSql = sql.literal(ReferenceClock.clockMillisSql)

  /**
   * PostgreSQL: one autocommit `UPDATE … FROM unnest(…)` renews the chunk; its predicates are
   * the single heartbeat's (running, this owner, the reading within the database clock's
   * allowance, evaluated once each row is locked). Only leases it did not return are read again,
   * in one statement with the clock, to name their outcome; a lease that still holds was missed
   * only by the clock at that instant and is replayed.
   */
  const renewPg = (
    method: Method,
    chunk: ReadonlyArray<RunLease>,
    now: number,
    check: ReferenceClock.ReadingCheck
  ): Effect.Effect<Map<string, HeartbeatOutcome>, RunStoreError> =>
    Effect.gen(function*() {
      const rows = yield* statement(
        ctx,
        method,
        method,
        sql<Returned>`UPDATE flows_runs AS r SET heartbeat_at_ms = GREATEST(r.heartbeat_at_ms, ${now})
          FROM unnest(${chunk.map((l) => l.runId)}::text[], ${chunk.map((l) => l.owner.hostId)}::text[],
            ${chunk.map((l) => l.owner.pid)}::bigint[], ${chunk.map((l) => l.owner.nonce)}::text[])
            AS l(run_id, host_id, pid, nonce)
          WHERE r.run_id = l.run_id AND r.status = 'running' AND r.owner_host_id = l.host_id
            AND r.owner_pid = l.pid AND r.owner_nonce = l.nonce AND ${readingAdmitted(ctx, now)}
          RETURNING r.run_id, r.owner_host_id, r.owner_pid, r.owner_nonce, r.heartbeat_at_ms`
      )
      const answers = new Map<string, HeartbeatOutcome>()
      for (const row of rows) answers.set(returnedKey(row), updated(Number(row.heartbeat_at_ms)))
      const missing = chunk.filter((lease) => !answers.has(keyOf(lease)))
      if (missing.length === 0) return answers
      const read = yield* Effect.mapError(
        sql<(Present | { readonly run_id: null }) & { readonly reference_clock_ms: number | string }>`SELECT r.*, ${clockSql} AS reference_clock_ms
          FROM (SELECT 1) AS one LEFT JOIN (SELECT run_id, status, owner_host_id, owner_pid, owner_nonce
            FROM flows_runs WHERE run_id = ANY(${missing.map((l) => l.runId)}::text[])) AS r ON true`,
        (error) => Errors.fromFailure(method, error)
      )
      yield* ctx.clock.checkAgainst(check, Number(read[0]?.reference_clock_ms))
      const replay: Array<RunLease> = []
      classify(missing, read.filter((row): row is Present & { readonly reference_clock_ms: number | string } => row.run_id !== null), answers, replay)
      if (replay.length === 0) return answers
      for (const [key, outcome] of yield* renewPg(method, replay, now, check)) answers.set(key, outcome)
      return answers
    })

  /**
   * SQLite: one `BEGIN IMMEDIATE` transaction per chunk, the reading bounded before it; the
   * leases travel as one JSON parameter, so the statement text (and its prepared statement) is
   * the same for every chunk. The losing path reads the missing runs inside the same transaction.
   */
  const renewSqlite = (method: Method, chunk: ReadonlyArray<RunLease>, now: number) =>
    write(
      ctx,
      method,
      method,
      Effect.gen(function*() {
        const leases = JSON.stringify(chunk.map((l) => [l.runId, l.owner.hostId, l.owner.pid, l.owner.nonce]))
        const rows = yield* sql<Returned>`UPDATE flows_runs SET heartbeat_at_ms = MAX(heartbeat_at_ms, ${now})
          FROM (SELECT value ->> 0 AS run_id, value ->> 1 AS host_id, value ->> 2 AS pid, value ->> 3 AS nonce
            FROM json_each(${leases})) AS l
          WHERE flows_runs.run_id = l.run_id AND flows_runs.status = 'running'
            AND flows_runs.owner_host_id = l.host_id AND flows_runs.owner_pid = l.pid
            AND flows_runs.owner_nonce = l.nonce
          RETURNING run_id, owner_host_id, owner_pid, owner_nonce, heartbeat_at_ms`
        const answers = new Map<string, HeartbeatOutcome>()
        for (const row of rows) answers.set(returnedKey(row), updated(Number(row.heartbeat_at_ms)))
        const missing = chunk.filter((lease) => !answers.has(keyOf(lease)))
        if (missing.length === 0) return answers
        const read = yield* sql<Present>`SELECT run_id, status, owner_host_id, owner_pid, owner_nonce FROM flows_runs
          WHERE run_id IN (SELECT value FROM json_each(${JSON.stringify(missing.map((l) => l.runId))}))`
        // Inside the write lock nothing moved since the update: a lease that holds cannot be missing.
        classify(missing, read, answers, [])
        return answers
      })
    )

  /** Names the outcome of each missing lease from the rows read; leases that still hold go to `replay`. */
  const classify = (
    missing: ReadonlyArray<RunLease>,
    read: ReadonlyArray<Present>,
    answers: Map<string, HeartbeatOutcome>,
    replay: Array<RunLease>
  ) => {
    const present = new Set(read.map((row) => row.run_id))
    const held = new Set(read.filter((row) => row.status === "running").map(returnedKey))
    for (const lease of missing) {
      const key = keyOf(lease)
      if (!present.has(lease.runId)) answers.set(key, notFound)
      else if (held.has(key)) replay.push(lease)
      else answers.set(key, fenceLost)
    }
  }

  /** Any other strategy is asked run by run, as `heartbeat` asks it. */
  const renewEach = (chunk: ReadonlyArray<RunLease>, now: number) =>
    Effect.reduce(chunk, new Map<string, HeartbeatOutcome>(), (answers, lease) =>
      Effect.map(heartbeat(lease.runId, lease.owner, now), (outcome) => answers.set(keyOf(lease), outcome)))

  /**
   * Renews the distinct leases (sorted by run id, so concurrent batches lock rows in one order),
   * chunk by chunk, and counts each lease's outcome as one heartbeat.
   */
  const renewAll = (method: Method, leases: ReadonlyArray<RunLease>, now: number) =>
    Effect.gen(function*() {
      const distinct = [...new Map(leases.map((lease) => [keyOf(lease), lease])).values()]
        .sort((a, b) => a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0)
      const answers = new Map<string, HeartbeatOutcome>()
      if (distinct.length === 0) return answers
      const check: ReferenceClock.ReadingCheck = {
        method,
        runId: distinct[0]!.runId,
        nowMs: now,
        extra: { runs: distinct.length }
      }
      yield* ctx.clock.beforeWrite(check)
      yield* Effect.annotateCurrentSpan({ runs: distinct.length })
      for (let from = 0; from < distinct.length; from += chunkSize) {
        const chunk = distinct.slice(from, from + chunkSize)
        const renewed = !ctx.rowLeases
          ? yield* renewEach(chunk, now)
          : ctx.isPostgres
          ? yield* renewPg(method, chunk, now, check)
          : yield* renewSqlite(method, chunk, now)
        for (const [key, outcome] of renewed) answers.set(key, outcome)
      }
      const counts = { Updated: 0, FenceLost: 0, NotFound: 0 }
      for (const outcome of answers.values()) counts[outcome._tag]++
      for (const tag of ["Updated", "FenceLost", "NotFound"] as const) {
        if (counts[tag] > 0) yield* Metric.incrementBy(RunStoreMetrics.heartbeat[tag], counts[tag])
      }
      return answers
    })

  const heartbeatMany = (owner: OwnerIdType, runIds: ReadonlyArray<string>, nowMs: number) =>
    operation(
      "heartbeatMany",
      undefined,
      Effect.gen(function*() {
        const who = yield* admit("heartbeatMany", Admission.owner("owner", owner))
        const ids = yield* admit("heartbeatMany", Admission.runIds(runIds))
        const now = yield* admit("heartbeatMany", Boundary.safeNonNegative("nowMs", nowMs))
        yield* Effect.annotateCurrentSpan({ ownerHostId: who.hostId })
        const answers = yield* renewAll("heartbeatMany", ids.map((runId) => ({ runId, owner: who })), now)
        const byRun = new Map<string, HeartbeatOutcome>()
        for (const runId of ids) byRun.set(runId, answers.get(leaseKey(runId, who.hostId, who.pid, who.nonce))!)
        return byRun as ReadonlyMap<string, HeartbeatOutcome>
      })
    )

  const heartbeatLeases = (leases: ReadonlyArray<RunLease>, nowMs: number) =>
    operation(
      "heartbeatLeases",
      undefined,
      Effect.gen(function*() {
        const admitted = yield* admit("heartbeatLeases", Admission.leases(leases))
        const now = yield* admit("heartbeatLeases", Boundary.safeNonNegative("nowMs", nowMs))
        const answers = yield* renewAll("heartbeatLeases", admitted, now)
        return admitted.map((lease) => answers.get(keyOf(lease))!)
      })
    )

  return { heartbeatMany, heartbeatLeases }
}
