/**
 * Several OS processes (each its own `PgDatabase` pool) on one PostgreSQL schema:
 * schema-wide read-then-increment writes serialize with no busy reaching a caller,
 * keyed writes on different keys overlap in time, and concurrent migration passes
 * on a fresh schema apply each migration once (the must-holds).
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as Migrations from "@baton/database/Migrations"
import * as PgDatabase from "@baton/database/PgDatabase"
import * as TestDatabase from "@baton/database/TestDatabase"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as PgTestSchema from "../src/internal/pgTestSchema.js"
import { counterSet, intervalBody } from "./fixtures/counterSet.js"
import { lastLine } from "./fixtures/events.js"
import { removeTempDirs, tempDir } from "./fixtures/files.js"
import { rawQuery } from "./fixtures/pg.js"
import { completion, spawnFixture } from "./support/processes.js"

const url = TestDatabase.postgresTestUrl("multiprocess-pg")

const fixture = (name: string) => new URL(`./fixtures/${name}.ts`, import.meta.url)

interface Interval {
  readonly proc: string
  readonly started_us: number
  readonly ended_us: number
}

/** Pairs of intervals from different processes that overlap in time. */
const crossOverlaps = (intervals: ReadonlyArray<Interval>) => {
  const pairs = new Set<string>()
  let count = 0
  for (const a of intervals) {
    for (const b of intervals) {
      if (a.proc < b.proc && a.started_us < b.ended_us && b.started_us < a.ended_us) {
        count++
        pairs.add(`${a.proc}-${b.proc}`)
      }
    }
  }
  return { count, pairs: [...pairs].sort() }
}

describe.skipIf(url === undefined)("multi-process PostgreSQL", () => {
  const pgUrl = url!

  /** Run `test` against a fresh migrated schema (counter + intervals), dropped afterwards. */
  const withSchema = <A>(test: (schema: string) => Promise<A>) =>
    Effect.runPromise(
      Effect.gen(function*() {
        yield* Migrations.run([counterSet])
        const sql = yield* SqlClient.SqlClient
        const schema = (yield* sql<{ name: string }>`SELECT current_schema() AS name`)[0]!.name
        return yield* Effect.promise(() => test(schema))
      }).pipe(Effect.provide(TestDatabase.layerPostgres(pgUrl)))
    )

  const runAll = async (name: string, inputs: ReadonlyArray<unknown>) => {
    const results = await Promise.all(inputs.map((input) => completion(spawnFixture(fixture(name), [JSON.stringify(input)]))))
    for (const result of results) {
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
      expect(lastLine<{ failures: Array<string> }>(result.stdout).failures).toEqual([])
    }
    return results
  }

  it("4 processes x 500 schema-wide read-then-increment writes end at exactly 2000 with no busy reaching a caller", () =>
    withSchema(async (schema) => {
      const target = { dialect: "pg", url: pgUrl, schema }
      await runAll("counter-writes", Array.from({ length: 4 }, () => ({ target, writes: 500 })))
      const rows = await rawQuery(pgUrl, `SELECT value FROM "${schema}".counter WHERE id = 1`)
      expect(Number(rows[0]?.value)).toBe(2000)
    }), 240_000)

  it("keyed writes of 4 processes on 4 different keys overlap in time; schema-wide ones never do", () =>
    withSchema(async (schema) => {
      const target = { dialect: "pg", url: pgUrl, schema }
      const read = async () =>
        (await rawQuery(pgUrl, `SELECT proc, started_us, ended_us FROM "${schema}".intervals`)).map((row) => ({
          proc: String(row.proc),
          started_us: Number(row.started_us),
          ended_us: Number(row.ended_us)
        }))
      // The processes start together (a barrier), so tsx start-up delays on a loaded machine
      // cannot separate their writes in time.
      await rawQuery(pgUrl, `CREATE TABLE "${schema}".interval_barrier (proc TEXT PRIMARY KEY)`)
      await runAll(
        "pg-intervals",
        Array.from({ length: 4 }, (_, i) => ({ target, proc: `k${i}`, key: `k${i}`, writes: 10, holdMs: 40, barrier: 4 }))
      )
      const keyed = await read()
      expect(keyed).toHaveLength(40)
      // Every pair of processes had transactions open at the same time: none waited
      // for another's commit.
      expect(crossOverlaps(keyed).pairs).toEqual(["k0-k1", "k0-k2", "k0-k3", "k1-k2", "k1-k3", "k2-k3"])
      // Control: the same measurement on concurrent schema-wide writes (two pools in this
      // process) finds no overlap at all, so the method does detect serialization.
      await rawQuery(pgUrl, `DELETE FROM "${schema}".intervals`)
      await Effect.runPromise(
        Effect.forEach(["s0", "s1"], (proc) =>
          Effect.gen(function*() {
            const writer = yield* DurableWriter.DurableWriter
            for (let seq = 0; seq < 5; seq++) yield* writer.write(intervalBody(proc, seq, 40))
          }).pipe(Effect.provide(PgDatabase.layer({ url: pgUrl, schema }))), { concurrency: "unbounded" })
      )
      const schemaWide = await read()
      expect(schemaWide).toHaveLength(10)
      expect(crossOverlaps(schemaWide).count).toBe(0)
    }), 240_000)

  it("two processes migrating one fresh schema at once both succeed and each migration runs once", async () => {
    const dir = tempDir()
    const schema = `test_${randomBytes(16).toString("hex")}`
    const logFile = path.join(dir, "log.txt")
    const releaseFile = path.join(dir, "release")
    fs.writeFileSync(logFile, "")
    try {
      const spawnPass = (tag: string) =>
        spawnFixture(fixture("migrate"), [
          JSON.stringify({ target: { dialect: "pg", url: pgUrl, schema }, tag, logFile, releaseFile })
        ])
      const done = Promise.all([completion(spawnPass("a")), completion(spawnPass("b"))])
      const lines = () => fs.readFileSync(logFile, "utf8").trim().split("\n")
      const deadline = Date.now() + 60_000
      // Release migration 1 once it runs in one process and the other process waits
      // for the schema lock (its open or its pass).
      const waiting = async () =>
        (await rawQuery(
          pgUrl,
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
             AND ((classid::bigint << 32) | objid::bigint) = hashtextextended('baton:writer:' || $1, 0)`,
          [schema]
        ))[0]?.n > 0
      while (!(lines().some((l) => l.endsWith(" m1")) && await waiting())) {
        if (Date.now() > deadline) throw new Error(`no concurrent pass observed: ${lines().join(", ")}`)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      fs.writeFileSync(releaseFile, "")
      const results = await done
      for (const result of results) {
        expect(result.stderr).toBe("")
        expect(result.code).toBe(0)
      }
      const applied = results.map((result) => lastLine<{ applied: Array<number> }>(result.stdout).applied)
      expect(applied.slice().sort((x, y) => y.length - x.length)).toEqual([[10001, 10002, 10003], []])
      expect(lines().filter((line) => / m\d$/.test(line)).map((line) => line.slice(2))).toEqual(["m1", "m2", "m3"])
      const ledger = await rawQuery(
        pgUrl,
        `SELECT migration_id::int AS id, namespace, name FROM "${schema}".flows_migrations ORDER BY migration_id`
      )
      expect(ledger).toEqual([
        { id: 10001, namespace: "fixture", name: "first" },
        { id: 10002, namespace: "fixture", name: "second" },
        { id: 10003, namespace: "fixture", name: "third" }
      ])
    } finally {
      await Effect.runPromise(PgTestSchema.drop(pgUrl, schema))
      removeTempDirs()
    }
  }, 120_000)
})
