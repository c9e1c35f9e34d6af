/** NodeRuntime builds (node.md check 2): one ledger pass over every package and the application. */
import { describe, expect, it } from "@effect/vitest"
import * as ControlMigrations from "@baton/control/Migrations"
import * as Migrations from "@baton/database/Migrations"
import * as JournalMigrations from "@baton/journal/Migrations"
import * as RunStoreMigrations from "@baton/run-store/Migrations"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import { runFixture } from "../../database/test/support/processes.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { appSet, flows } from "./fixtures/runtimeFlows.js"
import { tempDb } from "./fixtures/runtimeProcesses.js"

const sets = [JournalMigrations.set, RunStoreMigrations.set, ControlMigrations.set, appSet]
const fixture = new URL("./fixtures/runtime-build.ts", import.meta.url)

const ledger = Effect.gen(function*() {
  const status = yield* Migrations.status(sets)
  const sql = yield* SqlClient.SqlClient
  const [mode] = yield* sql<{ journal_mode: string }>`PRAGMA journal_mode`
  return { status, journalMode: mode?.journal_mode }
})

describe("NodeRuntime.layer builds", () => {
  it.live("a new file: one ledger pass records every package and the application; 0600 and WAL; a rebuild applies nothing", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const layer = NodeRuntime.layer({ filename: db.filename, flows, migrations: [appSet], mode: "client" })
      const first = yield* Effect.provide(ledger, layer)
      const namespaces = new Set(first.status.applied.map((m) => m.namespace))
      expect(namespaces).toEqual(new Set(["journal", "run-store", "control", "runtime-test"]))
      expect(first.status.pending).toEqual([])
      expect(first.status.applied.some((m) => m.id === 10_001)).toBe(true)
      expect(first.journalMode).toBe("wal")
      expect(fs.statSync(db.filename).mode & 0o777).toBe(0o600)
      const second = yield* Effect.provide(ledger, layer)
      expect(second.status.applied).toEqual(first.status.applied)
      const rerun = yield* Effect.provide(Migrations.run(sets), layer)
      expect(rerun).toEqual([])
    }))

  it("two processes building on one new file at once both succeed, one ledger row per migration", async () => {
    const db = tempDb()
    const [a, b] = await Promise.all([runFixture(fixture, [db.filename]), runFixture(fixture, [db.filename])])
    expect(a.stdout).toContain("built")
    expect(b.stdout).toContain("built")
    const status = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(NodeRuntime.layer({ filename: db.filename, mode: "client", migrations: [appSet] }))
      return yield* Effect.provide(Migrations.status(sets), context)
    })))
    const ids = status.applied.map((m) => m.id)
    expect(new Set(ids).size).toBe(ids.length)
    expect(status.pending).toEqual([])
    expect(status.applied.length).toBe(
      sets.reduce((total, set) => total + Object.keys(set.migrations).length, 0)
    )
  }, 120_000)
})
