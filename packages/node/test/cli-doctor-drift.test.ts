/**
 * node.md 6.4: a stuck run whose recorded code differs from the loaded catalog's is reported as code drift
 * (hosts skip it), not promised a takeover; a catalog without the run's flow reports no drift.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { baton, configModule, tempDir } from "./cli-support.js"

const waitConfig = fileURLToPath(new URL("./fixtures/cli-wait-config.ts", import.meta.url))
const flowModule = fileURLToPath(new URL("../src/Flow.ts", import.meta.url))

/** A catalog whose `wait-approval` is version 2: a host built from it refuses version-1 runs. */
const changedCatalog = (dir: string): string => {
  const file = path.join(dir, "changed-config.ts")
  fs.writeFileSync(
    file,
    `import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Flow from ${JSON.stringify(flowModule)}
export const flows = [Flow.make({
  id: "wait-approval",
  description: "Version 2 of the waiting flow",
  version: "2",
  input: Schema.Struct({}),
  handler: () => Effect.succeed({ deployed: false })
})]
`
  )
  return file
}

describe("baton doctor and code drift", () => {
  it("a run waiting for a host with drifted code is reported as drift with the resume hint", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    fs.writeFileSync(db, "")
    const own = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", waitConfig)
    expect((await own("plan", "wait-approval", "--input", "{}")).code).toBe(0)
    expect((await own("approve", "plan-1")).code).toBe(0)
    const launched = await own("launch", "plan-1")
    expect(launched.code, launched.stderr).toBe(0)
    const runId = launched.stdout.split("\n")[0]!

    const changed = await baton("doctor", "--db", db, "--config", changedCatalog(dir), "--json")
    expect(changed.code, changed.stdout).toBe(0)
    const checks = (JSON.parse(changed.stdout) as { checks: Array<{ check: string; level: string; message: string; hint?: string }> }).checks
    const stuck = checks.filter((c) => c.check === "stuck runs")
    expect(stuck).toHaveLength(1)
    expect(stuck[0]!.level).toBe("WARN")
    expect(stuck[0]!.message).toContain(`${runId} (wait-approval): waits for a host since`)
    expect(stuck[0]!.message).toContain("code drift")
    expect(stuck[0]!.message).not.toContain("will take it over")
    expect(stuck[0]!.hint).toBe(`baton resume ${runId} --allow-code-drift`)

    // The same code, and a catalog that lacks the flow: no drift to report.
    for (const config of [waitConfig, configModule]) {
      const doctor = await baton("doctor", "--db", db, "--config", config)
      expect(doctor.code, doctor.stdout).toBe(0)
      expect(doctor.stdout).not.toContain("drift")
    }
  })
})
