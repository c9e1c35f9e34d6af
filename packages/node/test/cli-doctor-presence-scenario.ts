/**
 * `baton doctor` against host presence rows, over SQLite or PostgreSQL: the hosts run as real processes
 * (fixtures/presence-host.ts), the CLI runs in this process, and staleness is driven by writing a row's
 * `seen_at_ms` into the past with raw SQL (no waiting).
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { baton, type CliResult, runVerbs } from "./cli-support.js"

/** Where the database is: the host fixture's JSON target, the CLI's flags and a raw SQL connection. */
export interface Target {
  readonly host: { readonly db: string } | { readonly url: string; readonly schema: string }
  readonly flags: ReadonlyArray<string>
  readonly database: Layer.Layer<SqlClient.SqlClient | DurableWriter.DurableWriter, unknown>
}

interface Check {
  readonly check: string
  readonly level: string
  readonly message: string
  readonly hint?: string
}

const config = fileURLToPath(new URL("./fixtures/presence-config.ts", import.meta.url))

/** Runs `statement` in one write on a connection of its own. */
export const rawSql = (target: Target, statement: string) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(target.database)
    const sql = Context.get(context, SqlClient.SqlClient)
    return yield* Context.get(context, DurableWriter.DurableWriter).write(sql.unsafe<Record<string, unknown>>(statement))
  })))

const presenceRows = (target: Target) =>
  rawSql(target, "SELECT host_id, pid, incarnation, flows_json FROM control_hosts ORDER BY incarnation")

/** Start a host serving `wait-approval` at `version` and `hold`; resolves once its presence row is written. */
export const startHost = async (target: Target, version: string, maxRuns = 4) => {
  const host = spawnFixture(new URL("./fixtures/presence-host.ts", import.meta.url), [
    JSON.stringify({ ...target.host, version, maxRuns })
  ])
  const done = completion(host)
  await new Promise<void>((resolve, reject) => {
    let out = ""
    host.stdout?.on("data", (chunk) => {
      out += String(chunk)
      if (out.includes("ready")) resolve()
    })
    host.once("exit", (code) => reject(new Error(`host exited ${code}`)))
  })
  return { host, done }
}

const stop = async (running: { readonly host: ChildProcess; readonly done: Promise<unknown> }) => {
  if (running.host.exitCode === null && running.host.signalCode === null) running.host.kill("SIGTERM")
  await running.done
}

/** Polls `check` every 200 ms until it holds (60 s at most). */
export const waitUntil = async (check: () => Promise<boolean>, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

const cliOf = (target: Target) => (...args: ReadonlyArray<string>): Promise<CliResult> =>
  baton(...args, ...target.flags, "--config", config)

const doctorChecks = async (target: Target, check: string) => {
  const doctor = await cliOf(target)("doctor", "--json")
  expect(doctor.code, doctor.stdout + doctor.stderr).toBe(0)
  return (JSON.parse(doctor.stdout) as { checks: Array<Check> }).checks.filter((c) => c.check === check)
}

const unserved = (runId: string): Array<Check> => [{
  check: "stuck runs",
  level: "WARN",
  message: `${runId} (wait-approval) waits for a host: no live host serves flow wait-approval (none lists it, drives or has parked a run of it)`,
  hint: "start a host that serves flow wait-approval"
}]

const expectDrift = (stuck: ReadonlyArray<Check>, runId: string, pid: number) => {
  expect(stuck).toHaveLength(1)
  expect(stuck[0]!.level).toBe("WARN")
  expect(stuck[0]!.message).toMatch(new RegExp(
    `^${runId} \\(wait-approval\\): waits for a host since \\d+ s; code drift: it recorded 1, and the live hosts serving flow wait-approval run other code \\(\\S+:${pid} \\(code 2\\)\\), so they skip it`
  ))
}

/**
 * An idle host (at capacity with a run of another flow, so it cannot take the new run) that lists the
 * run's flow with the run's code: the just-launched run is served, not reported.
 */
export const idleHostServesLaunchedRun = async (target: Target) => {
  const cli = cliOf(target)
  const running = await startHost(target, "1", 1)
  try {
    const rows = await presenceRows(target)
    expect(rows).toHaveLength(1)
    expect(Number(rows[0]!["pid"])).toBe(running.host.pid)
    expect(JSON.parse(String(rows[0]!["flows_json"]))).toEqual([{ flowId: "wait-approval", version: "1" }, { flowId: "hold", version: "1" }])
    const held = await runVerbs(cli).launch("hold", "plan-1")
    await waitUntil(async () => (await runVerbs(cli).status(held)).status === "running")
    const runId = await runVerbs(cli).launch("wait-approval", "plan-2")
    expect(await doctorChecks(target, "stuck runs")).toEqual([{ check: "stuck runs", level: "OK", message: "no stale owners or unserved runs" }])
    // The host had not taken the run: its presence row was the only evidence that it serves the flow.
    expect((await runVerbs(cli).status(runId)).status).toBe("accepted")
  } finally {
    await stop(running)
  }
}

/**
 * A host killed with SIGKILL leaves its row: it counts (here: as the live host with other code) until the
 * row is older than the stale cutoff, then the run is unserved.
 */
export const killedHostStopsCountingOnceStale = async (target: Target) => {
  const cli = cliOf(target)
  const running = await startHost(target, "2")
  const pid = running.host.pid!
  try {
    const runId = await runVerbs(cli).launch("wait-approval", "plan-1")
    expectDrift(await doctorChecks(target, "stuck runs"), runId, pid)
    running.host.kill("SIGKILL")
    expect((await running.done).signal).toBe("SIGKILL")
    expect(await presenceRows(target)).toHaveLength(1)
    expectDrift(await doctorChecks(target, "stuck runs"), runId, pid)
    // 31 s past: older than the 30 s stale cutoff, as if that much time went by without a refresh.
    await rawSql(target, "UPDATE control_hosts SET seen_at_ms = seen_at_ms - 31000")
    expect(await doctorChecks(target, "stuck runs")).toEqual(unserved(runId))
  } finally {
    await stop(running)
  }
}

/** SIGTERM: the host deletes its row on the way out, so its flow is unserved at once. */
export const gracefulShutdownRemovesRow = async (target: Target) => {
  const cli = cliOf(target)
  const running = await startHost(target, "2")
  try {
    expect(await presenceRows(target)).toHaveLength(1)
    running.host.kill("SIGTERM")
    const exit = await running.done
    expect(exit.signal === "SIGTERM" || exit.code !== null, exit.stderr).toBe(true)
    expect(await presenceRows(target), exit.stderr + exit.stdout).toEqual([])
    const runId = await runVerbs(cli).launch("wait-approval", "plan-1")
    expect(await doctorChecks(target, "stuck runs")).toEqual(unserved(runId))
  } finally {
    await stop(running)
  }
}
