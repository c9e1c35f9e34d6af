/**
 * `baton queue pause|resume|stats`: settings written through `Queues`, stats as a table and as JSON,
 * globals before the verb, a bad queue name as usage (exit 2) that writes nothing, and a missing
 * database as unavailable (exit 5, nothing created).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { baton, tempDir } from "./cli-support.js"
import { hold } from "./fixtures/queueFlows.js"
import { launch } from "./fixtures/runtimeSupport.js"

/** A database with released runs: two in `mail` (one delayed an hour), one in `default`. */
const withRuns = (filename: string) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const client = yield* Layer.build(NodeRuntime.layer({ filename, flows: [hold], mode: "client" }))
    const place = (queue: string, availableAtMs: number) =>
      Effect.gen(function*() {
        const runId = yield* launch("queue-test.hold", { ms: 1 })
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE control_runs SET queue = ${queue}, available_at_ms = ${availableAtMs} WHERE run_id = ${runId}`
      }).pipe(Effect.provide(client))
    yield* place("mail", 0)
    yield* place("mail", Date.now() + 3_600_000)
    yield* place("default", 0)
  })))

const queueRows = (filename: string) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(NodeRuntime.layer({ filename, mode: "client" }))
    const sql = yield* Effect.provide(SqlClient.SqlClient, context)
    return yield* sql<{ queue: string; paused: number }>`SELECT queue, paused FROM control_queues ORDER BY queue`
  })))

describe("baton queue", () => {
  it("stats lists each queue's available, delayed, running, failed, paused and limit; pause and resume change paused", async () => {
    const db = path.join(tempDir(), "baton.db")
    await withRuns(db)
    const before = await baton("queue", "stats", "--db", db)
    expect(before.code).toBe(0)
    expect(before.stdout.trim().split("\n")).toEqual([
      "QUEUE    AVAILABLE  DELAYED  RUNNING  FAILED  PAUSED  LIMIT",
      "default  1          0        0        0       no      -",
      "mail     1          1        0        0       no      -"
    ])
    const paused = await baton("queue", "pause", "mail", "--db", db)
    expect(paused).toMatchObject({ code: 0, stderr: "" })
    expect(paused.stdout).toContain("mail paused")
    const json = await baton("queue", "stats", "--db", db, "--json")
    expect(JSON.parse(json.stdout)).toEqual({
      _tag: "queues",
      items: [
        { queue: "default", available: 1, delayed: 0, running: 0, failed: 0, paused: false, concurrency: null },
        { queue: "mail", available: 1, delayed: 1, running: 0, failed: 0, paused: true, concurrency: null }
      ]
    })
    // `runs --queue` lists one queue's runs.
    const listed = await baton("runs", "--db", db, "--queue", "mail", "--json")
    expect((JSON.parse(listed.stdout) as { items: Array<{ queue: string }> }).items.map((r) => r.queue)).toEqual(["mail", "mail"])
    // Doctor says where the paused queue's runs are, and how to let them go.
    const doctor = await baton("doctor", "--db", db, "--json")
    const backlog = (JSON.parse(doctor.stdout) as { checks: Array<{ check: string; level: string; message: string; hint?: string }> })
      .checks.filter((c) => c.check === "backlog")
    expect(backlog).toEqual([{
      check: "backlog",
      level: "WARN",
      message: "queue mail is paused: 2 runs wait in it (1 available, 1 delayed); hosts claim none until it resumes",
      hint: "baton queue resume mail"
    }])
    // Globals before the verb are hoisted after it.
    const resumed = await baton("--db", db, "--json", "queue", "resume", "mail")
    expect(resumed.code).toBe(0)
    expect(JSON.parse(resumed.stdout)).toEqual({ _tag: "queue", queue: "mail", paused: false, concurrency: null })
    expect(await queueRows(db)).toEqual([{ queue: "mail", paused: 0 }])
  }, 30_000)

  it("a bad queue name is usage (exit 2) and writes nothing; a missing database is exit 5 and is not created", async () => {
    const db = path.join(tempDir(), "baton.db")
    await withRuns(db)
    for (const name of ["Mail", "a b", "_x", "x".repeat(129)]) {
      const bad = await baton("queue", "pause", name, "--db", db)
      expect(bad.code, name).toBe(2)
      expect(bad.stderr).toContain("queue must be")
    }
    expect(await queueRows(db)).toEqual([])
    // A bare `baton queue` names its subcommands.
    const bare = await baton("queue")
    expect(bare.code).toBe(2)
    expect(bare.stderr).toContain("baton: queue needs a subcommand: pause <queue>, resume <queue> or stats")
    const missing = path.join(tempDir(), "nothing.db")
    expect((await baton("queue", "pause", "mail", "--db", missing)).code).toBe(5)
    expect((await baton("queue", "stats", "--db", missing)).code).toBe(5)
    expect(fs.existsSync(missing)).toBe(false)
  }, 30_000)

  it("baton run shows a started run's queue, priority, availability and attempt bound; --json carries them", async () => {
    const db = path.join(tempDir(), "baton.db")
    const availableAt = Date.UTC(2031, 0, 2, 3, 4, 5)
    const runId = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const client = yield* Layer.build(NodeRuntime.layer({ filename: db, flows: [hold], mode: "client" }))
      const handle = yield* Flow.start(hold, { ms: 1 }, { queue: "mail", priority: 7, availableAt, retry: { maxAttempts: 3 } })
        .pipe(Effect.provide(client))
      return handle.runId
    })))
    const text = await baton("run", runId, "--db", db)
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^queue +mail \(priority 7, attempt 1 of 3, available 2031-01-02[ T]03:04:05/m)
    const json = await baton("run", runId, "--db", db, "--json")
    expect(JSON.parse(json.stdout).summary).toMatchObject({ queue: "mail", priority: 7, availableAt, attempt: 1, maxAttempts: 3 })
    const runs = await baton("runs", "--db", db, "--json")
    expect(JSON.parse(runs.stdout).items[0]).toMatchObject({ runId, queue: "mail", priority: 7, attempt: 1 })
  }, 30_000)
})
