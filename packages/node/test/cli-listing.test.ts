/**
 * `baton runs` and `baton doctor` over a run row control cannot decode (a run-store row written without
 * control's summary), `baton plans` over a plan row it cannot decode, `baton journal` of a corrupt run,
 * argument checks before the database file, a shell-pasteable `next: --cursor`, and `baton journal --after` over the run's entries and its ownership facts.
 */
import * as DatabaseMigrations from "@baton/database/Migrations"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as Journal from "@baton/journal/Journal"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as SqlConsensus from "@baton/run-store/SqlConsensus"
import * as SqlJournal from "@baton/journal/SqlJournal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as RunStoreMigrations from "@baton/run-store/Migrations"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { baton, configModule, migratedDatabase, snapshot, tempDir } from "./cli-support.js"
import * as Support from "./example-support.js"

/** The run-store stack of docs/run-store.md (journal + run-store migrations, no control) over `filename`. */
const stores = (filename: string) => {
  const database = Layer.provideMerge(
    DatabaseMigrations.layer([JournalMigrations.set, RunStoreMigrations.set]),
    SqliteDatabase.layer({ filename })
  )
  const consensus = Layer.provideMerge(SqlConsensus.layer, database)
  return Layer.provideMerge(Layer.mergeAll(RunStore.layerWith, SqlJournal.layerWith(), AttemptStore.layer), consensus)
}

const withStores = <A, E>(filename: string, effect: Effect.Effect<A, E, RunStore.RunStore | Journal.Journal>) =>
  Effect.runPromise(Effect.provide(effect, stores(filename)).pipe(Effect.orDie))

/** Run one statement on the SQLite file `filename`. */
const rawSql = (filename: string, statement: string) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)).pipe(Effect.provide(SqliteDatabase.layer({ filename })), Effect.orDie)
  )

/** A database with runs `engine-1`, `engine-2` (engine rows, readable) and `future` (no flow: unreadable). */
const databaseWithUnreadableRun = async () => {
  const dir = tempDir()
  const db = path.join(dir, "baton.db")
  await withStores(db, Effect.gen(function*() {
    const store = yield* RunStore.RunStore
    yield* store.create("engine-1", JSON.stringify({ flowName: "engine-flow" }))
    yield* store.create("future", "{}")
    yield* store.create("engine-2", JSON.stringify({ flowName: "engine-flow" }))
  }))
  // A mutating verb adds control's tables (the run is not found: exit 3).
  expect((await baton("cancel", "nope", "--reason", "x", "--db", db)).code).toBe(3)
  return { dir, db }
}

describe("baton runs with a run control cannot decode", () => {
  it("lists the unreadable run in its place marked, with its row's times, warns on stderr, exits 0; doctor WARNs naming it", async () => {
    const { db } = await databaseWithUnreadableRun()
    // The row settled: its finish time is what UPDATED shows.
    await rawSql(db, "UPDATE flows_runs SET status = 'failed', finished_at_ms = created_at_ms + 123456 WHERE run_id = 'future'")
    const listed = await baton("runs", "--db", db)
    expect(listed.code, listed.stderr).toBe(0)
    const lines = listed.stdout.split("\n").filter((l) => /^(engine|future)/.test(l))
    expect(lines.map((l) => l.split(/\s+/)[0])).toEqual(["engine-2", "future", "engine-1"])
    expect(lines[0]).toMatch(/^engine-2\s+engine-flow\s/)
    expect(lines[1]).toMatch(/^future\s+\?\s+failed \(unreadable\)/)
    expect(listed.stderr).toMatch(/^baton: warning: 1 run\(s\) cannot be read \(future: .*flowName.*\); they are listed marked unreadable$/m)

    const json = await baton("runs", "--db", db, "--json")
    expect(json.code, json.stderr).toBe(0)
    const doc = JSON.parse(json.stdout) as { items: Array<{ runId: string; readable?: false; issue?: string; createdAt: number; updatedAt: number }> }
    expect(Object.keys(doc)).not.toContain("unreadable")
    expect(doc.items.map((i) => [i.runId, i.readable])).toEqual([["engine-2", undefined], ["future", false], ["engine-1", undefined]])
    const future = doc.items[1]!
    expect(future.issue).toContain("flows_runs.state_json")
    expect(future.updatedAt - future.createdAt).toBe(123456)

    // Filters still apply to the readable runs.
    const filtered = await baton("runs", "--db", db, "--flow", "engine-flow", "--limit", "1", "--json")
    expect(filtered.code, filtered.stderr).toBe(0)
    expect((JSON.parse(filtered.stdout) as { items: Array<{ runId: string }> }).items.map((i) => i.runId)).toEqual(["engine-2"])

    const doctor = await baton("doctor", "--db", db)
    expect(doctor.code, doctor.stdout).toBe(0)
    expect(doctor.stdout).toMatch(/^WARN\s+schema\s+1 run\(s\) cannot be read as runs: future \(failed: /m)
    expect(doctor.stdout).not.toContain("every public read works")
  }, 60_000)
})

describe("baton plans with a plan control cannot decode", () => {
  it("lists it in place marked unreadable, warns on stderr naming the column and rule, exits 0; doctor WARNs naming it", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    await migratedDatabase(db)
    for (const root of ["a", "b"]) {
      fs.mkdirSync(path.join(dir, root))
      const made = await baton("plan", "index-dir", "--input", JSON.stringify({ root: path.join(dir, root) }), "--config", configModule, "--db", db)
      expect(made.code, made.stderr).toBe(0)
    }
    await rawSql(db, `UPDATE control_plans SET card_json = '{"PGSECRET2":1}' WHERE plan_id = 'plan-1'`)

    const listed = await baton("plans", "--db", db)
    expect(listed.code, listed.stderr).toBe(0)
    const lines = listed.stdout.split("\n").filter((l) => /^plan-/.test(l))
    expect(lines[0]).toMatch(/^plan-1\s+\?\s+pending \(unreadable\)/)
    expect(lines[1]).toMatch(/^plan-2\s+index-dir\s+pending\s/)
    expect(listed.stderr).toBe(
      "baton: warning: 1 plan(s) cannot be read (plan-1: control_plans.card_json at planId: is required); they are listed marked unreadable\n"
    )
    expect(listed.stdout + listed.stderr).not.toContain("PGSECRET2")

    const json = await baton("plans", "--db", db, "--json")
    expect(json.code, json.stderr).toBe(0)
    const doc = JSON.parse(json.stdout) as { items: Array<Record<string, unknown>> }
    expect(doc.items[0]).toEqual({ planId: "plan-1", decision: "pending", readable: false, issue: "plan plan-1: control_plans.card_json at planId: is required" })
    expect((doc.items[1]!.card as { planId: string }).planId).toBe("plan-2")

    const doctor = await baton("doctor", "--db", db)
    expect(doctor.stdout).toMatch(/^WARN\s+schema\s+1 plan\(s\) cannot be read: plan-1 \(control_plans\.card_json at planId: is required\)/m)
    expect(doctor.stdout).not.toContain("every public read works")
    expect(doctor.stdout).not.toContain("PGSECRET2")

    // A plans cursor names a plan row: "0" never does.
    const zero = await baton("plans", "--cursor", "0", "--db", db)
    expect(zero.code).toBe(2)
    expect(zero.stderr).toContain(`cursor: must be a cursor this listing returned, received "0"`)
  }, 60_000)
})

describe("baton journal on a run whose summary cannot be read", () => {
  it("prints the run's journal with one warning naming the column and rule; baton run still fails naming them", async () => {
    const root = Support.makeTree(2)
    const db = path.join(tempDir(), "baton.db")
    const runtime = Support.clientRuntime(db)
    let runId: string
    try {
      runId = await runtime.runPromise(Support.launch({ root }))
    } finally {
      await runtime.dispose()
    }
    const cancelled = await baton("cancel", runId, "--reason", "stop", "--db", db)
    expect(cancelled.code, cancelled.stderr).toBe(0)
    await rawSql(
      db,
      `UPDATE flows_journal_events SET payload_json = json_set(payload_json, '$.principal', 'PLANTED-MARKER')
        WHERE run_id = '${runId}' AND event_type = 'control.run.cancel-requested'`
    )

    const shown = await baton("run", runId, "--db", db)
    expect(shown.code).toBe(1)
    expect(shown.stderr).toContain("flows_journal_events.payload_json at principal: must be an object")

    const printed = await baton("journal", runId, "--db", db)
    expect(printed.code, printed.stderr).toBe(0)
    expect(printed.stdout).toContain("control.run.cancel-requested")
    expect(printed.stderr).toBe(
      `baton: warning: run ${runId}: flows_journal_events.payload_json at principal: must be an object; the run's summary cannot be read, printing its journal\n`
    )
    const json = await baton("journal", runId, "--db", db, "--json")
    expect(json.code, json.stderr).toBe(0)
    expect((JSON.parse(json.stdout) as Array<{ eventType: string }>).map((e) => e.eventType)).toContain("control.run.cancel-requested")
    expect(shown.stderr + printed.stderr).not.toContain("PLANTED-MARKER")
  }, 60_000)
})

describe("arguments are checked before the database file", () => {
  it.each([
    ["runs", "--limit", "0"],
    ["runs", "--status", "bogus"],
    ["runs", "--since", "yesterday"],
    ["runs", "--cursor", "garbage"],
    ["plans", "--cursor", "garbage"],
    ["plans", "--decision", "maybe"],
    ["plans", "--limit", "501"],
    ["journal", "run-1", "--after", "-5"],
    ["run", "run-1", "--tail", "-1"],
    ["runs", "--limit", "abc"],
    ["runs", "--queue", "Not A Queue"],
    ["plans", "--limit", "20x"],
    ["journal", "run-1", "--after", "1.5"],
    ["run", "run-1", "--tail", "many"],
    ["cancel", "run-1", "--reason", ""],
    ["approve", "plan-1", "--reason", ""],
    ["deny", "plan-1", "--reason", "x".repeat(1001)]
  ])("%s %s %s on a missing file: exit 2, nothing created", async (...args) => {
    const dir = tempDir()
    const result = await baton(...args, "--db", path.join(dir, "missing.db"))
    expect(result.code, result.stderr).toBe(2)
    // The option's own rule, named by the option, whether its text is no number or out of range.
    expect(result.stderr).toContain(`baton: ${args[args.length - 2]}`)
    expect(result.stderr).not.toContain("no database at")
    expect(snapshot(dir)).toEqual({})
  })
})

describe("an empty --db", () => {
  it("is usage (exit 2) naming --db, not a directory opened as a database", async () => {
    const result = await baton("runs", "--db", "")
    expect(result.code, result.stderr).toBe(2)
    expect(result.stderr).toContain("baton: --db must name a SQLite database file, got an empty path")
  })
})

describe("baton runs next cursor", () => {
  it("prints the cursor shell-quoted: pasted through a shell it reaches the next page", async () => {
    const { db } = await databaseWithUnreadableRun()
    // Two readable runs and a control-readable page: drop the unreadable row from the listing by a filter.
    const first = await baton("runs", "--db", db, "--flow", "engine-flow", "--limit", "1", "--order", "oldest")
    expect(first.code, first.stderr).toBe(0)
    const line = first.stdout.split("\n").find((l) => l.startsWith("next: --cursor "))
    expect(line).toBeDefined()
    const pasted = line!.slice("next: --cursor ".length)
    expect(pasted.startsWith("'")).toBe(true)
    // What a shell makes of the pasted text: exactly one argument, the cursor.
    const shell = spawnSync("sh", ["-c", `printf '%s\\n' ${pasted}`], { encoding: "utf8" })
    expect(shell.status).toBe(0)
    const words = shell.stdout.split("\n").filter((w) => w.length > 0)
    expect(words).toHaveLength(1)
    const second = await baton("runs", "--db", db, "--flow", "engine-flow", "--limit", "1", "--order", "oldest", "--cursor", words[0]!)
    expect(second.code, second.stderr).toBe(0)
    expect(second.stdout).toMatch(/^engine-2\s/m)
    expect(second.stdout).not.toMatch(/^engine-1\s/m)
  }, 60_000)
})

describe("baton journal --after", () => {
  it("cuts the run's entries by SEQ and its ownership facts from that entry on", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    const owner = { hostId: "host-a", pid: 4211, nonce: "nonce-a" }
    const pause = Effect.sleep("20 millis")
    await withStores(db, Effect.gen(function*() {
      const store = yield* RunStore.RunStore
      const journal = yield* Journal.Journal
      yield* store.create("run-1", JSON.stringify({ flowName: "engine-flow" }))
      const emit = (eventType: string) => journal.emitDurableUnfenced({ runId: "run-1", sourceId: "test", eventType, payload: {} })
      yield* emit("test.first")
      yield* pause
      yield* emit("test.second")
      yield* pause
      const row = yield* store.get("run-1")
      yield* store.claimAndOwn("run-1", row, owner, Date.now())
      yield* pause
      yield* emit("test.third")
    }))
    expect((await baton("cancel", "nope", "--db", db)).code).toBe(3)
    const all = JSON.parse((await baton("journal", "run-1", "--db", db, "--json")).stdout) as Array<{ seq: number; eventType: string; ownership?: boolean }>
    const facts = all.filter((e) => e.ownership === true)
    expect(facts.length).toBeGreaterThan(0)
    const seqOf = (type: string) => all.find((e) => e.eventType === type && e.ownership !== true)!.seq

    // After the second entry: the ownership facts written after it, and the third entry.
    const afterSecond = JSON.parse((await baton("journal", "run-1", "--db", db, "--json", "--after", String(seqOf("test.second")))).stdout) as typeof all
    expect(afterSecond.filter((e) => e.ownership !== true).map((e) => e.eventType)).toEqual(["test.third"])
    expect(afterSecond.filter((e) => e.ownership === true)).toHaveLength(facts.length)

    // After the third (last) entry: nothing, not the older ownership facts.
    const afterThird = await baton("journal", "run-1", "--db", db, "--after", String(seqOf("test.third")))
    expect(afterThird.code, afterThird.stderr).toBe(0)
    expect(afterThird.stdout).toBe("No journal entries.\n")

    const negative = await baton("journal", "run-1", "--db", db, "--after", "-1")
    expect(negative.code).toBe(2)
    expect(negative.stderr).toContain("--after must be a non-negative integer")
  }, 60_000)
})

describe("baton doctor on an orphaned claim whose claimant is alive", () => {
  it("WARNs that the claimant is alive and offers no --fix hint; --fix leaves it alone", async () => {
    const root = Support.makeTree(2)
    const db = path.join(tempDir(), "baton.db")
    const runtime = Support.clientRuntime(db)
    const alive = spawn("sleep", ["60"], { stdio: "ignore" })
    try {
      const runId = await runtime.runPromise(Support.launch({ root }))
      await runtime.runPromise(Effect.gen(function*() {
        const store = yield* RunStore.RunStore
        const host = yield* NodeRuntime.NodeHost
        const row = yield* store.get(runId)
        // A live process of this host, named by its start ticks (/proc/<pid>/stat field 22) as a nonce carries them.
        const stat = fs.readFileSync(`/proc/${alive.pid}/stat`, "utf8")
        const startTicks = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
        const claimant = { hostId: host.identity.hostId, pid: alive.pid!, nonce: `n1-${startTicks}-000000000000.alive` }
        const outcome = yield* store.claim(runId, { status: row.status, owner: row.owner, heartbeatAtMs: row.heartbeatAtMs }, claimant, Date.now() - 45_000)
        expect(outcome._tag).toBe("Claimed")
      }))
      const warned = await baton("doctor", "--db", db)
      expect(warned.code, warned.stdout).toBe(0)
      expect(warned.stdout).toMatch(new RegExp(`^WARN\\s+orphaned claims\\s+${runId}: orphaned claim by \\S+:${alive.pid} since \\d+ s; the claimant is still alive \\(.*\\), so --fix leaves it alone$`, "m"))
      expect(warned.stdout).not.toContain("hint: baton doctor --fix")
      const fixed = await baton("doctor", "--fix", "--db", db)
      expect(fixed.stdout).toMatch(new RegExp(`^WARN\\s+orphaned claims\\s+${runId}: .*still alive.*it was left alone$`, "m"))
    } finally {
      alive.kill("SIGKILL")
      await runtime.dispose()
    }
  }, 120_000)
})
