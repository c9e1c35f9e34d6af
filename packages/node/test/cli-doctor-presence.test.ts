/**
 * `baton doctor` sees live hosts by their presence rows (SQLite): an idle host serving a flow, a killed
 * host until its row is stale, no host once one shut down gracefully; without the presence table it falls
 * back to what the runs show.
 */
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import {
  gracefulShutdownRemovesRow,
  idleHostServesLaunchedRun,
  killedHostStopsCountingOnceStale,
  rawSql,
  startHost,
  type Target,
  waitUntil
} from "./cli-doctor-presence-scenario.js"
import { baton, runVerbs, tempDir } from "./cli-support.js"

const config = fileURLToPath(new URL("./fixtures/presence-config.ts", import.meta.url))

const sqlite = (): Target => {
  const db = path.join(tempDir(), "baton.db")
  return { host: { db }, flags: ["--db", db], database: SqliteDatabase.layer({ filename: db }) }
}

describe("baton doctor and host presence (SQLite)", () => {
  it("an idle host whose presence row lists the flow serves a just-launched run: no problem reported", () =>
    idleHostServesLaunchedRun(sqlite()), 120_000)

  it("a host killed with SIGKILL counts until its presence row is older than the stale cutoff", () =>
    killedHostStopsCountingOnceStale(sqlite()), 120_000)

  it("a host's graceful shutdown deletes its presence row, so its flow is unserved at once", () =>
    gracefulShutdownRemovesRow(sqlite()), 120_000)

  it("without the presence table doctor falls back to the runs hosts hold instead of failing", async () => {
    const target = sqlite()
    const v1 = (...args: ReadonlyArray<string>) => baton(...args, ...target.flags, "--config", config)
    const running = await startHost(target, "1", 1)
    try {
      // As if the table were lost: the host's refreshes now fail (it keeps running) and reads find no table.
      await rawSql(target, "DROP TABLE control_hosts")
      const held = await runVerbs(v1).launch("hold", "plan-1")
      await waitUntil(async () => (await runVerbs(v1).status(held)).status === "running")
      // A second hold run waits (the host is at capacity); the host drives that flow, so it is served.
      await runVerbs(v1).launch("hold", "plan-2")
      const next = await runVerbs(v1).launch("wait-approval", "plan-3")
      const doctor = await v1("doctor", "--json")
      expect(doctor.code, doctor.stdout + doctor.stderr).toBe(0)
      const stuck = (JSON.parse(doctor.stdout) as { checks: Array<{ check: string; message: string }> }).checks
        .filter((c) => c.check === "stuck runs")
      // The host is seen through the run it drives (flow hold serves the waiting hold run), and nothing
      // shows it serves wait-approval.
      expect(stuck.map((c) => c.message)).toEqual([
        `${next} (wait-approval) waits for a host: no live host serves flow wait-approval (none lists it, drives or has parked a run of it)`
      ])
      expect(running.host.exitCode).toBe(null)
    } finally {
      running.host.kill("SIGTERM")
      await running.done
    }
  }, 120_000)
  it("on a database from before the presence table, read verbs and doctor work and create nothing; doctor lists the pending migration", async () => {
    const target = sqlite()
    fs.writeFileSync(target.flags[1]!, "")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, ...target.flags, "--config", config)
    const runId = await runVerbs(cli).launch("wait-approval", "plan-1")
    // As an earlier build left it: control's first migration only.
    await rawSql(target, "DROP TABLE control_hosts")
    await rawSql(target, "DELETE FROM flows_migrations WHERE migration_id = 2002")
    const runs = await cli("runs")
    expect(runs.code, runs.stderr).toBe(0)
    expect(runs.stdout).toContain(runId)
    const doctor = await cli("doctor", "--json")
    expect(doctor.code, doctor.stdout + doctor.stderr).toBe(0)
    const checks = (JSON.parse(doctor.stdout) as { checks: Array<{ check: string; level: string; message: string }> }).checks
    expect(checks.find((c) => c.check === "ledger")).toMatchObject({ level: "WARN", message: expect.stringContaining("uses an older Baton schema (1 migration pending)") })
    expect(checks.filter((c) => c.check === "stuck runs").map((c) => c.message)).toEqual([
      `${runId} (wait-approval) waits for a host: no live host serves flow wait-approval (none lists it, drives or has parked a run of it)`
    ])
    expect(await rawSql(target, "SELECT name FROM sqlite_master WHERE name = 'control_hosts'")).toEqual([])
    expect(await rawSql(target, "SELECT name FROM flows_migrations WHERE migration_id = 2002")).toEqual([])
  }, 120_000)
})
