/**
 * `baton doctor` judges runs waiting for a host against the live hosts control's runs show: a launched
 * run whose flow no live host serves is reported at once (not after 60 s), and a resume that live hosts
 * skip because they run other code for its flow is named as code drift, with both versions, instead of
 * "start a host".
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { baton, runVerbs, startWaitHost, tempDir } from "./cli-support.js"

const v1 = fileURLToPath(new URL("./fixtures/cli-wait-config.ts", import.meta.url))
const v2 = fileURLToPath(new URL("./fixtures/cli-wait-config-v2.ts", import.meta.url))

interface Check {
  readonly check: string
  readonly level: string
  readonly message: string
  readonly hint?: string
}

const checksOf = (stdout: string) => (JSON.parse(stdout) as { checks: Array<Check> }).checks

const waitUntil = async (check: () => Promise<boolean>, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

describe("baton doctor and live hosts", () => {
  it("a just-launched run whose flow no live host serves is reported at once", async () => {
    const db = path.join(tempDir(), "baton.db")
    fs.writeFileSync(db, "")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", v1)
    const runId = await runVerbs(cli).launch("wait-approval", "plan-1")
    const doctor = await cli("doctor", "--json")
    expect(doctor.code, doctor.stdout).toBe(0)
    const stuck = checksOf(doctor.stdout).filter((c) => c.check === "stuck runs")
    expect(stuck).toEqual([{
      check: "stuck runs",
      level: "WARN",
      message: `${runId} (wait-approval) waits for a host: no live host serves flow wait-approval (none lists it, drives or has parked a run of it)`,
      hint: "start a host that serves flow wait-approval"
    }])
  }, 60_000)

  it("many runs of one unserved flow are one finding naming the count and the first runs, not one per run", async () => {
    const db = path.join(tempDir(), "baton.db")
    fs.writeFileSync(db, "")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", v1)
    const runIds: Array<string> = []
    for (let i = 1; i <= 5; i++) runIds.push(await runVerbs(cli).launch("wait-approval", `plan-${i}`))
    const doctor = await cli("doctor", "--json")
    expect(doctor.code, doctor.stdout).toBe(0)
    const stuck = checksOf(doctor.stdout).filter((c) => c.check === "stuck runs")
    expect(stuck).toEqual([{
      check: "stuck runs",
      level: "WARN",
      message: `5 runs (${runIds.slice(0, 3).join(", ")}, …) of flow wait-approval wait for a host: no live host serves flow wait-approval (none lists it, drives or has parked a run of it)`,
      hint: "start a host that serves flow wait-approval"
    }])
  }, 60_000)

  it("a resume that the live host skips for its other code is named as code drift with both versions, not 'start a host'", async () => {
    const db = path.join(tempDir(), "baton.db")
    const own = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", v1)
    const next = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", v2)
    let { done, host } = await startWaitHost(db, "1")
    try {
      // A version-1 host parks r1 on its approval request, then is replaced by a version-2 host.
      const r1 = await runVerbs(own).launch("wait-approval", "plan-1")
      await waitUntil(async () => (await runVerbs(own).status(r1)).status === "waiting-approval")
      host.kill("SIGTERM")
      await done
      ;({ done, host } = await startWaitHost(db, "2"))
      // The version-2 host is seen live through the run it parks.
      const r2 = await runVerbs(next).launch("wait-approval", "plan-2")
      await waitUntil(async () => (await runVerbs(next).status(r2)).status === "waiting-approval")

      // Approving r1 asks for its resume; the version-2 host skips it (code drift).
      expect((await own("approve", `${r1}:deploy`)).code).toBe(0)
      const pending = async () => (await runVerbs(own).status(r1)).pendingResume !== undefined
      expect(await pending()).toBe(true)

      for (const cli of [own, next, (...args: ReadonlyArray<string>) => baton(...args, "--db", db)]) {
        const doctor = await cli("doctor", "--json")
        expect(doctor.code, doctor.stdout).toBe(0)
        const backlog = checksOf(doctor.stdout).filter((c) => c.check === "backlog")
        expect(backlog).toHaveLength(1)
        expect(backlog[0]!.level).toBe("WARN")
        expect(backlog[0]!.message).toMatch(new RegExp(
          `^${r1} \\(wait-approval\\): resume delegation waits; code drift: it recorded 1, and the live hosts serving flow wait-approval run other code \\(\\S+:\\d+ \\(code 2\\)\\), so they skip it`
        ))
        expect(backlog[0]!.hint).toMatch(new RegExp(`^baton resume ${r1} --allow-code-drift --config <the catalog of \\S+:\\d+>$`))
        expect(doctor.stdout).not.toContain("start a host")
      }

      // A version-1 run launched now waits for a host the same way: the live host skips it.
      const r3 = await runVerbs(own).launch("wait-approval", "plan-3")
      const doctor = await baton("doctor", "--db", db, "--json")
      const stuck = checksOf(doctor.stdout).filter((c) => c.check === "stuck runs")
      expect(stuck).toHaveLength(1)
      expect(stuck[0]!.level).toBe("WARN")
      expect(stuck[0]!.message).toMatch(new RegExp(
        `^${r3} \\(wait-approval\\): waits for a host since \\d+ s; code drift: it recorded 1, and the live hosts serving flow wait-approval run other code \\(\\S+:\\d+ \\(code 2\\)\\)`
      ))
      expect(stuck[0]!.hint).toMatch(new RegExp(`^baton resume ${r3} --allow-code-drift --config <the catalog of \\S+:\\d+>$`))
    } finally {
      host.kill("SIGTERM")
      await done
    }
  }, 180_000)
})
