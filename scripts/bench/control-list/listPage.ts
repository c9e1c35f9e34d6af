/**
 * The measurement of `pnpm bench -- control-list`, shared with the queue bench: a database seeded in bulk
 * with control runs (flows_runs + control_runs, valid summaries; four in five completed, one in five live
 * and owned), then, for the first page and a deep page (90 %), each iteration times one `Control.list` page
 * of 50 and the same keyset SELECT through the raw driver (better-sqlite3, node-postgres) in turn.
 * `sqlite` and `postgres` answer medians in ms (per page, and `listMs`/`rawMs` pooled over both pages)
 * and the facade's statements per page, and print them as they go.
 */
import * as Control from "@baton/control/Control"
import type * as DurableWriter from "@baton/database/DurableWriter"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { benchFlow, controlStack } from "../../lib/controlStack.js"
import * as RawDrivers from "../../lib/rawDrivers.js"

const warmup = 30
const pageSize = 50
const chunk = 100_000


const flow = benchFlow("a listed flow")

const stack = <E>(database: Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, E>) => controlStack([flow], database)

/** The page's keyset SELECT as a raw driver sends it: the columns a run listing reads, 50 rows + 1. */
const rawSelect = (placeholder: string) =>
  `SELECT r.row_seq, r.run_id, r.status, r.created_at_ms, r.started_at_ms, r.finished_at_ms,
    r.owner_host_id, r.owner_pid, r.owner_nonce, r.heartbeat_at_ms,
    r.claim_host_id, r.claim_pid, r.claim_nonce, r.claimed_at_ms,
    r.parent_run_id, r.lineage_id, r.round_ordinal, r.cancel_requested_at_ms,
    r.waiting_reason, r.waiting_token, r.waiting_request, r.state_json,
    cr.run_id AS launch_run_id, cr.created_seq, cr.principal_id, cr.principal_kind, rr.requested_seq
  FROM flows_runs r LEFT JOIN control_runs cr ON cr.run_id = r.run_id
    LEFT JOIN control_run_resumes rr ON rr.run_id = r.run_id
  WHERE r.row_seq > ${placeholder} ORDER BY r.row_seq LIMIT ${pageSize + 1}`

/**
 * Seed `n` control runs: run g is `r<g>` with `row_seq` g; one in five (g % 5 = 1) is live, running and
 * owned by a dead bench host, the rest completed; each has a launch index row. The run store's revision
 * bookkeeping is filled in SQL as its insert trigger would, with the per-row trigger off for the seed
 * only (on PostgreSQL it updates its feed per row; on SQLite it reads MAX per row): this benchmark's own
 * throwaway schema or file.
 */
const seed = (n: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
    const sqliteTrigger = pg ? undefined : (yield* sql<{ sql: string }>`SELECT sql FROM sqlite_master
      WHERE type = 'trigger' AND name = 'flows_runs_revision_insert'`)[0]?.sql
    if (pg) yield* sql`ALTER TABLE flows_runs DISABLE TRIGGER flows_runs_revision_insert`
    else if (sqliteTrigger === undefined) return yield* Effect.dieMessage("flows_runs_revision_insert is missing")
    else yield* sql`DROP TRIGGER flows_runs_revision_insert`
    const g = pg ? "g" : "x"
    const live = `${g} % 5 = 1`
    const summary = `'{"runId":"r' || ${g} || '","flowId":"bench","status":"' ||
      CASE WHEN ${live} THEN 'running' ELSE 'completed' END ||
      '","createdAt":' || ${g} || ',"updatedAt":' || ${g} || ',"planId":"plan-' || ${g} ||
      '","executionDigest":"d1"}'`
    const runColumns = `${g}, 'r' || ${g}, CASE WHEN ${live} THEN 'running' ELSE 'completed' END, ${g}, ${g},
      CASE WHEN ${live} THEN NULL ELSE ${g} END,
      CASE WHEN ${live} THEN 'bench-host' END, CASE WHEN ${live} THEN 1 END, CASE WHEN ${live} THEN 'n' END,
      CASE WHEN ${live} THEN ${g} END, ${summary}`
    const insertRuns = `INSERT INTO flows_runs (row_seq, run_id, status, created_at_ms, started_at_ms, finished_at_ms,
      owner_host_id, owner_pid, owner_nonce, heartbeat_at_ms, state_json)`
    const insertLaunches = `INSERT INTO control_runs (run_id, created_seq, principal_id, principal_kind)`
    yield* Effect.forEach(
      Array.from({ length: Math.ceil(n / chunk) }, (_, i) => [i * chunk + 1, Math.min(n, (i + 1) * chunk)] as const),
      ([start, end]) =>
        sql.withTransaction(pg
          ? Effect.all([
            sql.unsafe(`${insertRuns} SELECT ${runColumns} FROM generate_series($1::bigint, $2::bigint) g`, [start, end]),
            sql.unsafe(`INSERT INTO flows_run_changes (run_id, revision, deleted, change_xid)
              SELECT 'r' || g, g, 0, pg_current_xact_id() FROM generate_series($1::bigint, $2::bigint) g`, [start, end]),
            sql.unsafe(`${insertLaunches} SELECT 'r' || g, g, 'bench', 'operator' FROM generate_series($1::bigint, $2::bigint) g`, [start, end])
          ])
          : Effect.all([
            sql.unsafe(`WITH RECURSIVE s(x) AS (SELECT CAST(? AS INTEGER) UNION ALL SELECT x + 1 FROM s WHERE x < ?)
              ${insertRuns} SELECT ${runColumns} FROM s`, [start, end]),
            sql.unsafe(`WITH RECURSIVE s(x) AS (SELECT CAST(? AS INTEGER) UNION ALL SELECT x + 1 FROM s WHERE x < ?)
              INSERT INTO flows_run_changes (run_id, revision, deleted, row_seq) SELECT 'r' || x, x, 0, x FROM s`, [start, end]),
            sql.unsafe(`WITH RECURSIVE s(x) AS (SELECT CAST(? AS INTEGER) UNION ALL SELECT x + 1 FROM s WHERE x < ?)
              ${insertLaunches} SELECT 'r' || x, x, 'bench', 'operator' FROM s`, [start, end])
          ])),
      { discard: true }
    )
    // Numbers continue after the seeded ones: PostgreSQL takes them from sequences, SQLite from MAX + 1.
    if (pg) {
      yield* sql`SELECT setval('flows_run_revision', ${n}), setval('flows_run_row_seq', ${n})`
      yield* sql`ALTER TABLE flows_runs ENABLE TRIGGER flows_runs_revision_insert`
      // What autovacuum does to a table after a bulk load; reads then see the steady state.
      yield* sql`VACUUM ANALYZE flows_runs`
      yield* sql`VACUUM ANALYZE control_runs`
    } else {
      yield* sql.unsafe(sqliteTrigger!)
      // Fold the seed's write-ahead log into the file, as a database at rest has it.
      yield* sql`PRAGMA wal_checkpoint(TRUNCATE)`
    }
    const [check] = yield* sql<{ runs: number; launches: number; changes: number; live: number }>`SELECT
      (SELECT COUNT(*) FROM flows_runs) AS runs, (SELECT COUNT(*) FROM control_runs) AS launches,
      (SELECT COUNT(*) FROM flows_run_changes) AS changes,
      (SELECT COUNT(*) FROM flows_runs WHERE status = 'running') AS live`
    const counts = [check!.runs, check!.launches, check!.changes].map(Number)
    if (counts.some((c) => c !== n)) return yield* Effect.dieMessage(`seed of ${n} left runs/launches/changes ${counts.join("/")}`)
    return { live: Number(check!.live) }
  })

const quantile = (values: ReadonlyArray<number>, q: number) => [...values].sort((a, b) => a - b)[Math.floor(values.length * q)]!
const median = (values: ReadonlyArray<number>) => quantile(values, 0.5)

interface Side {
  readonly list: Array<number>
  readonly raw: Array<number>
}

/** A facade cursor pointing after `rowSeq`: a first page's cursor with its key moved (the format is the facade's). */
const cursorAt = (first: string, rowSeq: number) => {
  const decoded = JSON.parse(first) as Record<string, unknown>
  return JSON.stringify({ ...decoded, rowSeq, runId: `r${rowSeq}` })
}

type Raw = (after: number) => Promise<number>

/** The plan of one statement as the dialect explains it (SQLite's query plan; PostgreSQL's EXPLAIN ANALYZE). */
const planOf = (text: string, params: ReadonlyArray<unknown>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
    const rows = yield* sql.unsafe<Record<string, unknown>>(
      pg ? `EXPLAIN (ANALYZE, SUMMARY ON) ${text}` : `EXPLAIN QUERY PLAN ${text}`,
      params as Array<unknown>
    )
    return rows.map((r) => `    ${String(pg ? r["QUERY PLAN"] : r["detail"])}`).join("\n")
  }).pipe(Effect.orDie)

/** How one measurement runs: `runs` seeded, `iterations` timed per page, `explain` the plans, `say` a line. */
export interface Options {
  readonly runs: number
  readonly iterations: number
  readonly explain?: boolean
  readonly say?: (text: string) => void
}

const measure = (options: Options, raw: Raw) =>
  Effect.gen(function*() {
    const { explain = false, iterations, runs } = options
    const control = yield* Control.Control
    const firstPage = yield* control.list({ _tag: "runs", limit: pageSize })
    if (firstPage._tag !== "runs" || firstPage.nextCursor === undefined) return yield* Effect.dieMessage("no first page")
    const deepAfter = Math.floor(runs * 0.9)
    const pages = [
      { label: "first page", after: 0, cursor: undefined as string | undefined },
      { label: "deep page (90 %)", after: deepAfter, cursor: cursorAt(firstPage.nextCursor, deepAfter) }
    ]
    const page = (cursor: string | undefined) =>
      Effect.flatMap(control.list({ _tag: "runs", limit: pageSize, ...(cursor === undefined ? {} : { cursor }) }), (response) =>
        response._tag === "runs" && response.items.length === pageSize
          ? Effect.succeed(response)
          : Effect.dieMessage("a page of 50 was expected"))
    // Statements one page sends, counted where the SQL client compiles them.
    const statements: Array<number> = []
    let live = 0
    const plans: Array<string> = []
    for (const p of pages) {
      const sent: Array<readonly [string, ReadonlyArray<unknown>]> = []
      const response = yield* Statement.withTransformer(page(p.cursor), (self) => {
        sent.push(self.compile())
        return Effect.succeed(self)
      })
      statements.push(sent.length)
      live += response.items.filter((r) => r.status !== "completed").length
      if (explain) {
        for (const [text, params] of sent) plans.push(`${p.label}:\n${yield* planOf(text, params)}`)
      }
    }
    const sides = pages.map((): Side => ({ list: [], raw: [] }))
    for (let i = 0; i < warmup + iterations; i++) {
      for (const [n, p] of pages.entries()) {
        const t0 = performance.now()
        yield* page(p.cursor)
        const t1 = performance.now()
        const rows = yield* Effect.promise(() => raw(p.after))
        const t2 = performance.now()
        if (rows !== pageSize + 1) return yield* Effect.dieMessage(`raw SELECT answered ${rows} rows`)
        if (i >= warmup) {
          sides[n]!.list.push(t1 - t0)
          sides[n]!.raw.push(t2 - t1)
        }
      }
    }
    return {
      statements,
      live,
      plans,
      pages: pages.map((p, n) => ({
        label: p.label,
        list: median(sides[n]!.list),
        raw: median(sides[n]!.raw),
        listP10: quantile(sides[n]!.list, 0.1),
        rawP10: quantile(sides[n]!.raw, 0.1)
      })),
      listMs: median(sides.flatMap((s) => s.list)),
      rawMs: median(sides.flatMap((s) => s.raw))
    }
  })

/** One dialect's figures: per page and pooled medians in ms, statements per page, the plans asked for. */
export type Result = Effect.Effect.Success<ReturnType<typeof measure>>

const report = (options: Options, dialect: string, seedMs: number, liveRuns: number, result: Result) => {
  const { iterations, runs } = options
  const say = options.say ?? ((text: string) => process.stdout.write(`${text}\n`))
  say(
    `\n${dialect}: ${runs.toLocaleString("en-US")} runs (${liveRuns.toLocaleString("en-US")} live), seeded in ${
      (seedMs / 1000).toFixed(1)
    } s; page of ${pageSize}, median of ${iterations}; statements per page: ${result.statements.join(", ")}`
  )
  for (const p of result.pages) {
    say(
      `  ${p.label.padEnd(18)} Control.list ${p.list.toFixed(3).padStart(8)} ms   raw SELECT ${p.raw.toFixed(3).padStart(7)} ms   ratio ${
        (p.list / p.raw).toFixed(2)
      }   (10th percentile ${p.listP10.toFixed(3)} / ${p.rawP10.toFixed(3)} ms)`
    )
  }
  for (const plan of result.plans) say(`  plan, ${plan}`)
}

const sqliteRaw = (filename: string): { readonly raw: Raw; readonly close: () => void } => {
  const Database = RawDrivers.betterSqlite3()
  const db = new Database(filename, { readonly: true })
  const select = db.prepare(rawSelect("?"))
  return { raw: (after) => Promise.resolve(select.all(after).length), close: () => db.close() }
}

const pgRaw = (url: string, schema: string) =>
  Effect.map(RawDrivers.pgClient(url, schema), (client) => {
    const text = rawSelect("$1")
    const raw: Raw = async (after) => (await client.query(text, [after])).rowCount ?? 0
    return { client, raw }
  })

/** Seed a fresh SQLite file with `options.runs` runs and time its pages; the file is removed afterwards. */
export const sqlite = (options: Options) => Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "baton-bench-control-list-"))),
    (created) => Effect.sync(() => fs.rmSync(created, { recursive: true, force: true }))
  )
  const filename = path.join(dir, "bench.db")
  return yield* Effect.gen(function*() {
    const t0 = performance.now()
    const { live } = yield* seed(options.runs)
    const seedMs = performance.now() - t0
    const driver = yield* Effect.acquireRelease(Effect.sync(() => sqliteRaw(filename)), (d) => Effect.sync(d.close))
    const result = yield* measure(options, driver.raw)
    report(options, "SQLite file", seedMs, live, result)
    return result
  }).pipe(Effect.provide(stack(SqliteDatabase.layer({ filename }))), Effect.scoped)
}).pipe(Effect.scoped)

/** Seed a fresh PostgreSQL schema on `url` with `options.runs` runs and time its pages; the schema is dropped afterwards. */
export const postgres = (options: Options, url: string) =>
  Effect.gen(function*() {
    const t0 = performance.now()
    const { live } = yield* seed(options.runs)
    const seedMs = performance.now() - t0
    const sql = yield* SqlClient.SqlClient
    const [current] = yield* sql<{ schema: string }>`SELECT current_schema() AS schema`
    const driver = yield* pgRaw(url, current!.schema)
    const result = yield* measure(options, driver.raw)
    report(options, "PostgreSQL", seedMs, live, result)
    return result
  }).pipe(Effect.provide(stack(TestDatabase.layerPostgres(url))), Effect.scoped)


/** Pooled medians of the dialects measured, in ms rounded to the microsecond; `null` where one was not. */
export interface Figures {
  readonly listPageMs: { readonly sqlite: number | null; readonly pg: number | null }
  readonly listRawMs: { readonly sqlite: number | null; readonly pg: number | null }
}

/** SQLite when `sqlite`, then PostgreSQL when `pgUrl` is given, one after the other. */
export const both = (options: Options, dialects: { readonly sqlite: boolean; readonly pgUrl: string | undefined }) =>
  Effect.gen(function*() {
    const onSqlite = dialects.sqlite ? yield* sqlite(options) : undefined
    const onPg = dialects.pgUrl === undefined ? undefined : yield* postgres(options, dialects.pgUrl)
    const round = (ms: number | undefined) => (ms === undefined ? null : Math.round(ms * 1000) / 1000)
    return {
      listPageMs: { sqlite: round(onSqlite?.listMs), pg: round(onPg?.listMs) },
      listRawMs: { sqlite: round(onSqlite?.rawMs), pg: round(onPg?.rawMs) }
    } satisfies Figures
  })
