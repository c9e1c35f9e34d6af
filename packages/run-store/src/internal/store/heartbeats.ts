/**
 * Batched heartbeats: every listed lease renewed by one statement per chunk of
 * at most 1,000 runs, its outcome read from what that statement reports.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import { Effect, Hash, Metric } from "effect"
import * as RunStoreMetrics from "../../RunStoreMetrics.js"
import * as Admission from "../Admission.js"
import * as Boundary from "../Boundary.js"
import * as Errors from "../errors.js"
import { HeartbeatOutcome, type OwnerIdType, type RunLease, type RunStoreError, type Service } from "../model.js"
import * as ReferenceClock from "../ReferenceClock.js"
import { admit, operation, readingAdmitted, statement, type StoreContext, write } from "./context.js"

/** Most runs one statement renews: larger batches are split into chunks of this size. */
export const chunkSize = 1_000

/** A lease the clock alone kept from renewing is tried again this many times, no more. */
const maxReplays = 3

/**
 * One outcome shared by many answers, frozen. Its hash is cached first: a `Data` value caches its
 * hash on itself when first hashed (by `Equal.equals`, for one), which a frozen value could not.
 */
const shared = <A extends HeartbeatOutcome>(outcome: A): A => {
  Hash.hash(outcome)
  Object.freeze(outcome)
  return outcome
}

const fenceLost = shared(HeartbeatOutcome.FenceLost())
const notFound = shared(HeartbeatOutcome.NotFound())

type Method = "heartbeatMany" | "heartbeatLeases"

/** A run row as the losing path reads it. */
interface Present {
  readonly run_id: string
  readonly status: string
  readonly owner_host_id: string | null
  readonly owner_pid: number | string | null
  readonly owner_nonce: string | null
  readonly heartbeat_at_ms: number | string | null
}

const holds = (row: Present, owner: OwnerIdType) =>
  row.status === "running" && row.owner_host_id === owner.hostId && Number(row.owner_pid) === owner.pid &&
  row.owner_nonce === owner.nonce

export const make = (
  ctx: StoreContext,
  heartbeat: Service["heartbeat"]
): Pick<Service, "heartbeatMany" | "heartbeatLeases"> => {
  const { sql } = ctx
  const clockSql = sql.literal(ReferenceClock.clockMillisSql)

  /**
   * The outcome of each lease of a chunk whose statement did not renew all of them, from the
   * rows read afterwards: absent is `NotFound`; held by the lease's owner with a stamp at or
   * above the reading is `Updated` with that stamp (renewed now, or already ahead); held with a
   * lower stamp was missed by the reading's clock check alone and goes to `replay`; anything else
   * (another owner, not running) is `FenceLost`.
   */
  const classify = (
    chunk: ReadonlyArray<RunLease>,
    rows: ReadonlyArray<Present>,
    now: number,
    answers: Array<HeartbeatOutcome | undefined>,
    replay: Array<number>
  ) => {
    const byId = new Map(rows.map((row) => [row.run_id, row]))
    for (let i = 0; i < chunk.length; i++) {
      const lease = chunk[i]!
      const row = byId.get(lease.runId)
      if (row === undefined) answers[i] = notFound
      else if (!holds(row, lease.owner)) answers[i] = fenceLost
      else if (Number(row.heartbeat_at_ms) >= now) answers[i] = HeartbeatOutcome.Updated({ heartbeatAtMs: Number(row.heartbeat_at_ms) })
      else replay.push(i)
    }
  }

  const affected = (method: Method) => (raw: unknown) =>
    Effect.mapError(DurableWriter.affectedRows(raw), (error) => Errors.fromFailure(method, error))

  /**
   * PostgreSQL: one autocommit `UPDATE … FROM unnest(…)` renews the chunk. Its predicates are the
   * single heartbeat's (running, this lease's owner, the reading within the database clock's
   * allowance, evaluated once each row is locked), and it writes only stamps it raises, so when
   * it changed as many rows as the chunk has leases every lease was renewed to the reading and no
   * row travels back. Otherwise one read of the chunk's rows, with the clock, names the outcomes.
   */
  const renewPg = (
    method: Method,
    chunk: ReadonlyArray<RunLease>,
    now: number,
    check: ReferenceClock.ReadingCheck,
    replays: number
  ): Effect.Effect<ReadonlyArray<HeartbeatOutcome>, RunStoreError> =>
    Effect.gen(function*() {
      const ids = chunk.map((l) => l.runId)
      const changed = yield* statement(
        ctx,
        method,
        method,
        sql`UPDATE flows_runs AS r SET heartbeat_at_ms = ${now}
          FROM unnest(${ids}::text[], ${chunk.map((l) => l.owner.hostId)}::text[],
            ${chunk.map((l) => l.owner.pid)}::bigint[], ${chunk.map((l) => l.owner.nonce)}::text[])
            AS l(run_id, host_id, pid, nonce)
          WHERE r.run_id = l.run_id AND r.status = 'running' AND r.owner_host_id = l.host_id
            AND r.owner_pid = l.pid AND r.owner_nonce = l.nonce AND r.heartbeat_at_ms < ${now}
            AND ${readingAdmitted(ctx, now)}`.raw
      ).pipe(Effect.flatMap(affected(method)))
      if (changed === chunk.length) return renewedAll(chunk, now)
      const read = yield* Effect.mapError(
        sql<Present & { readonly reference_clock_ms: number | string }>`SELECT r.*, ${clockSql} AS reference_clock_ms
          FROM (SELECT 1) AS one LEFT JOIN (SELECT run_id, status, owner_host_id, owner_pid, owner_nonce, heartbeat_at_ms
            FROM flows_runs WHERE run_id = ANY(${ids}::text[])) AS r ON true`,
        (error) => Errors.fromFailure(method, error)
      )
      yield* ctx.clock.checkAgainst(check, Number(read[0]?.reference_clock_ms))
      const answers: Array<HeartbeatOutcome | undefined> = new Array(chunk.length)
      const replay: Array<number> = []
      classify(chunk, read.filter((row) => row.run_id !== null), now, answers, replay)
      if (replay.length > 0) {
        if (replays >= maxReplays) {
          return yield* Effect.fail(Errors.writeInvariant(method, chunk[replay[0]!]!.runId, "a held lease was not renewed"))
        }
        const again = yield* renewPg(method, replay.map((i) => chunk[i]!), now, check, replays + 1)
        replay.forEach((index, k) => (answers[index] = again[k]))
      }
      return answers as ReadonlyArray<HeartbeatOutcome>
    })

  /**
   * SQLite: one `BEGIN IMMEDIATE` transaction per chunk, the reading bounded before it. The
   * leases travel as one JSON parameter, so every chunk sends the same statement text (one
   * prepared statement). The losing path reads the chunk's rows inside the same transaction.
   */
  const renewSqlite = (method: Method, plan: SqlitePlan, now: number) =>
    write(
      ctx,
      method,
      method,
      Effect.gen(function*() {
        const { chunk } = plan
        const update = plan._tag === "ByRun"
          ? sql`UPDATE flows_runs SET heartbeat_at_ms = ${now}
            FROM (SELECT key AS run_id, value AS nonce FROM json_each(${plan.json})) AS l
            WHERE flows_runs.run_id = l.run_id AND flows_runs.status = 'running'
              AND flows_runs.owner_host_id = ${plan.hostId} AND flows_runs.owner_pid = ${plan.pid}
              AND flows_runs.owner_nonce = l.nonce AND flows_runs.heartbeat_at_ms < ${now}`
          : plan._tag === "OneProcess"
          ? sql`UPDATE flows_runs SET heartbeat_at_ms = ${now}
            FROM (SELECT value ->> 0 AS run_id, value ->> 1 AS nonce FROM json_each(${plan.json})) AS l
            WHERE flows_runs.run_id = l.run_id AND flows_runs.status = 'running'
              AND flows_runs.owner_host_id = ${plan.hostId} AND flows_runs.owner_pid = ${plan.pid}
              AND flows_runs.owner_nonce = l.nonce AND flows_runs.heartbeat_at_ms < ${now}`
          : sql`UPDATE flows_runs SET heartbeat_at_ms = ${now}
            FROM (SELECT value ->> 0 AS run_id, value ->> 1 AS host_id, value ->> 2 AS pid, value ->> 3 AS nonce
              FROM json_each(${plan.json})) AS l
            WHERE flows_runs.run_id = l.run_id AND flows_runs.status = 'running'
              AND flows_runs.owner_host_id = l.host_id AND flows_runs.owner_pid = l.pid
              AND flows_runs.owner_nonce = l.nonce AND flows_runs.heartbeat_at_ms < ${now}`
        const changed = yield* update.raw.pipe(Effect.flatMap(affected(method)))
        if (changed === chunk.length) return renewedAll(chunk, now)
        const read = yield* sql<Present>`SELECT run_id, status, owner_host_id, owner_pid, owner_nonce, heartbeat_at_ms
          FROM flows_runs WHERE run_id IN (SELECT value FROM json_each(${JSON.stringify(chunk.map((l) => l.runId))}))`
        const answers: Array<HeartbeatOutcome | undefined> = new Array(chunk.length)
        const replay: Array<number> = []
        classify(chunk, read, now, answers, replay)
        // Inside the write lock nothing moved since the update: a held lease it skipped is a bug.
        if (replay.length > 0) {
          return yield* Effect.fail(Errors.writeInvariant(method, chunk[replay[0]!]!.runId, "a held lease was not renewed"))
        }
        return answers as ReadonlyArray<HeartbeatOutcome>
      })
    )

  /** Every lease of the chunk renewed to the reading: one shared answer. */
  const renewedAll = (chunk: ReadonlyArray<RunLease>, now: number): ReadonlyArray<HeartbeatOutcome> => {
    const renewed = shared(HeartbeatOutcome.Updated({ heartbeatAtMs: now }))
    return chunk.map(() => renewed)
  }

  /** Any other strategy is asked run by run, as `heartbeat` asks it. */
  const renewEach = (chunk: ReadonlyArray<RunLease>, now: number) =>
    Effect.forEach(chunk, (lease) => heartbeat(lease.runId, lease.owner, now))

  /**
   * Renews `leases` chunk by chunk and answers one outcome per lease, in order, counting each
   * as one heartbeat. A lease listed twice is sent once (the same run for two owners is two
   * leases: at most one of them holds).
   */
  const renewAll = (method: Method, leases: ReadonlyArray<RunLease>, now: number) =>
    Effect.gen(function*() {
      const { distinct, positions } = Admission.isDistinctLeaseList(leases)
        ? { distinct: leases, positions: undefined }
        : deduplicate(leases)
      if (distinct.length === 0) return []
      const check: ReferenceClock.ReadingCheck = {
        method,
        runId: distinct[0]!.runId,
        nowMs: now,
        extra: { runs: distinct.length }
      }
      yield* ctx.clock.beforeWrite(check)
      yield* Effect.annotateCurrentSpan({ runs: distinct.length })
      const outcomes: Array<HeartbeatOutcome> = []
      if (ctx.rowLeases && !ctx.isPostgres) {
        for (const plan of sqlitePlans(distinct, positions === undefined)) {
          for (const outcome of yield* renewSqlite(method, plan, now)) outcomes.push(outcome)
        }
      } else {
        for (let from = 0; from < distinct.length; from += chunkSize) {
          const chunk = distinct.slice(from, from + chunkSize)
          const renewed = !ctx.rowLeases
            ? yield* renewEach(chunk, now)
            : yield* renewPg(method, chunk, now, check, 0)
          for (const outcome of renewed) outcomes.push(outcome)
        }
      }
      const counts = { Updated: 0, FenceLost: 0, NotFound: 0 }
      for (const outcome of outcomes) counts[outcome._tag]++
      for (const tag of ["Updated", "FenceLost", "NotFound"] as const) {
        if (counts[tag] > 0) yield* Metric.incrementBy(RunStoreMetrics.heartbeat[tag], counts[tag])
      }
      return positions === undefined ? outcomes : positions.map((k) => outcomes[k]!)
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
        const outcomes = yield* renewAll("heartbeatMany", ids.map((runId) => ({ runId, owner: who })), now)
        const byRun = new Map<string, HeartbeatOutcome>()
        ids.forEach((runId, i) => byRun.set(runId, outcomes[i]!))
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
        return yield* renewAll("heartbeatLeases", admitted, now)
      })
    )

  return { heartbeatMany, heartbeatLeases }
}

/**
 * One SQLite chunk and the JSON text its statement binds. A host's runs share its host id and
 * pid (each claim has its own nonce): then only run ids and nonces travel, as one object from
 * run id to nonce (`ByRun`, the cheapest for the engine to read) or, when a run is listed twice
 * (two owners' nonces), as `[runId, nonce]` pairs (`OneProcess`); leases of several processes
 * travel as `[runId, hostId, pid, nonce]` (`Mixed`).
 */
type SqlitePlan =
  | {
    readonly _tag: "ByRun" | "OneProcess"
    readonly chunk: ReadonlyArray<RunLease>
    readonly hostId: string
    readonly pid: number
    readonly json: string
  }
  | { readonly _tag: "Mixed"; readonly chunk: ReadonlyArray<RunLease>; readonly json: string }

const planChunk = (chunk: ReadonlyArray<RunLease>): SqlitePlan => {
  const { hostId, pid } = chunk[0]!.owner
  if (!chunk.every((l) => l.owner.hostId === hostId && l.owner.pid === pid)) {
    return {
      _tag: "Mixed",
      chunk,
      json: JSON.stringify(chunk.map((l) => [l.runId, l.owner.hostId, l.owner.pid, l.owner.nonce]))
    }
  }
  const byRun: Record<string, string> = Object.create(null)
  for (const lease of chunk) {
    if (lease.runId in byRun) {
      return { _tag: "OneProcess", chunk, hostId, pid, json: JSON.stringify(chunk.map((l) => [l.runId, l.owner.nonce])) }
    }
    byRun[lease.runId] = lease.owner.nonce
  }
  return { _tag: "ByRun", chunk, hostId, pid, json: JSON.stringify(byRun) }
}

/**
 * Plans of trusted lease lists (frozen, so their plans never go stale): the host pulse sends
 * the same list every interval until its membership changes, and builds the JSON once.
 */
const plansOf = new WeakMap<ReadonlyArray<RunLease>, ReadonlyArray<SqlitePlan>>()

/** `distinct` in chunks of at most {@link chunkSize}, planned once per trusted list. */
const sqlitePlans = (distinct: ReadonlyArray<RunLease>, trusted: boolean): ReadonlyArray<SqlitePlan> => {
  const known = trusted ? plansOf.get(distinct) : undefined
  if (known !== undefined) return known
  const plans: Array<SqlitePlan> = []
  for (let from = 0; from < distinct.length; from += chunkSize) plans.push(planChunk(distinct.slice(from, from + chunkSize)))
  if (trusted) plansOf.set(distinct, plans)
  return plans
}

/** The distinct leases, and for each given lease the index of its distinct copy. */
const deduplicate = (leases: ReadonlyArray<RunLease>) => {
  const distinct: Array<RunLease> = []
  const first = new Map<string, number>()
  const positions: Array<number> = new Array(leases.length)
  for (let i = 0; i < leases.length; i++) {
    const lease = leases[i]!
    const k = first.get(lease.runId)
    let at = k !== undefined && sameOwner(distinct[k]!.owner, lease.owner) ? k : -1
    // The same run for another owner (rare): look for an identical lease further on.
    if (at === -1 && k !== undefined) {
      at = distinct.findIndex((d) => d.runId === lease.runId && sameOwner(d.owner, lease.owner))
    }
    if (at === -1) {
      at = distinct.length
      if (k === undefined) first.set(lease.runId, at)
      distinct.push(lease)
    }
    positions[i] = at
  }
  return { distinct, positions }
}

const sameOwner = (a: OwnerIdType, b: OwnerIdType) => a.hostId === b.hostId && a.pid === b.pid && a.nonce === b.nonce
