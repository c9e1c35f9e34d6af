/**
 * One host owning many running runs, renewed by `keepAlive` loops over one `Heartbeat.Pulse`,
 * for `seconds` of real time after a warm-up: heartbeat statements per second counted at the
 * driver, this process's CPU share of one core over the window (`process.cpuUsage` ÷ wall time:
 * the whole process, loops, pulse, client and, on SQLite, the database engine itself), and the
 * oldest lease stamp seen while sampling every second over the window (every lease must stay
 * younger than the 30 s stale cutoff, and no loop may have ended). Prints one JSON line. Used
 * by `scripts/bench/run-store.ts`:
 *
 *   pulse-heartbeats.ts sqlite <file> <runs> <seconds> | pg <url> <schema> <runs> <seconds>
 *
 * The runs are inserted running with raw SQL (as `claimAndOwn` leaves them), each with its own
 * claim nonce as a host's runs have, so the batch mixes owners as it does in a host.
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as Heartbeat from "@baton/run-store/Heartbeat"
import * as Migrations from "@baton/run-store/Migrations"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Fiber, Layer, ManagedRuntime, Option } from "effect"
import { nextRowSeqText } from "../../packages/run-store/src/internal/rowSeq.js"
import * as Counter from "./StatementCounter.js"

const args = process.argv.slice(2)
const dialect = args[0]!
const [target, schema, rest] = dialect === "sqlite" ? [args[1]!, undefined, args.slice(2)] : [args[1]!, args[2]!, args.slice(3)]
const runs = Number(rest[0] ?? 10_000)
const seconds = Number(rest[1] ?? 12)
/** Ticks before the window: the first beats, JIT and prepared statements warm. */
const WARMUP_MS = 3_000
const hostId = "bench-host"
const ownerOf = (i: number) => ({ hostId, pid: process.pid, nonce: `claim-${i}` })

if (dialect === "sqlite") Counter.installSqlite()
else Counter.installPg()
const heartbeatStatements = Counter.matching(/^\s*UPDATE flows_runs\b[\s\S]*?\bSET heartbeat_at_ms\b/)

const database = dialect === "sqlite"
  ? SqliteDatabase.layer({ filename: target })
  : PgDatabase.layer({ url: target, schema: schema!, maxConnections: 2, applicationName: `bench:${schema}` })
const stack = Layer.merge(
  Heartbeat.layerPulse,
  Layer.provideMerge(
    RunStore.layer,
    Layer.provideMerge(DatabaseMigrations.layer([JournalMigrations.set, Migrations.set]), database)
  )
)
const runtime = ManagedRuntime.make(stack)

const ids = Array.from({ length: runs }, (_, i) => `pulse-${process.pid}-${i}`)
const startMs = Date.now()

/** The rows, inserted running and stamped now: one statement on PostgreSQL, one transaction on SQLite. */
const insert = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const writer = yield* DurableWriter.DurableWriter
  const owners = ids.map((_, i) => ownerOf(i))
  if (dialect !== "sqlite") {
    yield* writer.write(sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms,
        owner_host_id, owner_pid, owner_nonce, granted_at_ms, heartbeat_at_ms, state_json)
      SELECT ${sql.literal(nextRowSeqText(true))}, l.run_id, 'running', ${startMs}, ${startMs}, l.host_id, l.pid,
        l.nonce, ${startMs}, ${startMs}, '{}'
      FROM unnest(${ids}::text[], ${owners.map((o) => o.hostId)}::text[], ${owners.map((o) => o.pid)}::bigint[],
        ${owners.map((o) => o.nonce)}::text[]) AS l(run_id, host_id, pid, nonce)`)
    return
  }
  // SQLite numbers each row from the rows before it: one insert per run, in one transaction.
  yield* writer.write(Effect.forEach(ids, (id, i) =>
    sql`INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms,
        owner_host_id, owner_pid, owner_nonce, granted_at_ms, heartbeat_at_ms, state_json)
      VALUES (${sql.literal(nextRowSeqText(false))}, ${id}, 'running', ${startMs}, ${startMs},
        ${owners[i]!.hostId}, ${owners[i]!.pid}, ${owners[i]!.nonce}, ${startMs}, ${startMs}, '{}')`, { discard: true }))
})

/**
 * One idle work fiber and its `keepAlive` per run, all on the layer's pulse. Each loop starts as
 * if its last beat was confirmed up to 15 s ago (runs claimed at different times), so the loops'
 * own deadline checks spread over time as in a host that has run for a while, instead of all
 * falling on one instant.
 */
const keepAll = (baseMs: number) =>
  Effect.forEach(ids, (runId, i) =>
    Effect.gen(function*() {
      const work = yield* Effect.forkDaemon(Effect.never)
      const heartbeatAtMs = Math.max(startMs, baseMs - ((i * 7_919) % 15_000))
      const loop = yield* Effect.forkDaemon(Heartbeat.keepAlive(runId, ownerOf(i), work, { heartbeatAtMs }))
      return { work, loop }
    }))

const oldestStamp = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(
    sql<{ readonly oldest: number | string | null; readonly n: number | string }>`SELECT MIN(heartbeat_at_ms) AS oldest,
      COUNT(*) AS n FROM flows_runs WHERE status = 'running' AND owner_host_id = ${hostId}`,
    (rows) => ({ oldest: Number(rows[0]?.oldest), running: Number(rows[0]?.n) })
  ))

await runtime.runPromise(insert)
const loops = await runtime.runPromise(keepAll(Date.now()))
let maxAgeMs = 0
let sampledRunning = runs
const sample = async () => {
  const { oldest, running } = await runtime.runPromise(oldestStamp)
  maxAgeMs = Math.max(maxAgeMs, Date.now() - oldest)
  sampledRunning = Math.min(sampledRunning, running)
}
await new Promise((resolve) => setTimeout(resolve, WARMUP_MS))
const sampling = setInterval(() => void sample(), 1_000)
const before = Counter.snapshot()
const beatsBefore = heartbeatStatements()
const cpu = process.cpuUsage()
const start = performance.now()
await new Promise((resolve) => setTimeout(resolve, seconds * 1_000))
const used = process.cpuUsage(cpu)
const windowMs = performance.now() - start
const counts = Counter.diff(before, Counter.snapshot())
const beats = heartbeatStatements() - beatsBefore
clearInterval(sampling)
await sample()
const ended = await runtime.runPromise(
  Effect.map(Effect.forEach(loops, ({ loop, work }) =>
    Effect.map(Effect.all([Fiber.poll(loop), Fiber.poll(work)]), ([l, w]) => Option.isSome(l) || Option.isSome(w))), (done) => done.filter(Boolean).length)
)
const cpuMs = (used.user + used.system) / 1_000
const perSecond = (n: number) => (n * 1_000) / windowMs
const staleAfterMs = Duration.toMillis(Heartbeat.heartbeatStaleAfter)
process.stdout.write(JSON.stringify({
  dialect,
  ownedRuns: runs,
  windowMs: Math.round(windowMs),
  heartbeatStatements: beats,
  statementsPerS: perSecond(beats),
  transactionsPerS: perSecond(counts.transactions),
  roundTripsPerS: dialect === "sqlite" ? undefined : perSecond(counts.roundTrips),
  cpuMs,
  userCpuMs: used.user / 1_000,
  systemCpuMs: used.system / 1_000,
  cpuShare: cpuMs / windowMs,
  maxAgeMs,
  staleAfterMs,
  fresh: maxAgeMs < staleAfterMs && sampledRunning === runs && ended === 0,
  ended
}) + "\n")
await runtime.dispose()
process.exit(0)
