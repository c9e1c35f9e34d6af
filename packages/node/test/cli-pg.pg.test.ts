/**
 * node.md check 29 (CLI part) [pg]: `baton runs`, `run`, `journal`, `plans` and `doctor` against a
 * PostgreSQL schema with `--pg`/`--schema`.
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe, expect, it } from "@effect/vitest"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as IndexDir from "../src/example/IndexDir.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { baton, tempDir } from "./cli-support.js"
import * as Support from "./example-support.js"
import * as PgSchema from "./support/pgSchema.js"

const url = TestDatabase.postgresTestUrl("node cli --pg")

describe.skipIf(url === undefined)("cli on PostgreSQL", () => {
  it("reads runs, a run, its journal, plans and doctor from a schema", async () => {
    const schema = `cli_${randomBytes(8).toString("hex")}`
    const runtime = ManagedRuntime.make(Layer.orDie(NodeRuntime.layerPg({
      url: url!,
      schema,
      mode: "client",
      flows: [IndexDir.flow],
      migrations: [IndexDir.migrations]
    })))
    try {
      const root = path.join(tempDir(), "tree")
      fs.mkdirSync(root)
      fs.writeFileSync(path.join(root, "a.txt"), "a")
      const runId = await runtime.runPromise(Support.launch({ root }))
      const pg = ["--pg", url!, "--schema", schema]
      const runs = await baton("runs", ...pg)
      expect(runs.code, runs.stderr).toBe(0)
      expect(runs.stdout).toContain(`${runId}  index-dir  accepted`)
      const run = await baton("run", runId, ...pg, "--json")
      expect(run.code, run.stderr).toBe(0)
      expect(JSON.parse(run.stdout).summary.runId).toBe(runId)
      const journal = await baton("journal", runId, ...pg)
      expect(journal.code, journal.stderr).toBe(0)
      expect(journal.stdout).toContain("control.run.accepted")
      expect((await baton("plans", ...pg)).stdout).toMatch(/plan-1\s+index-dir\s+approved/)
      const doctor = await baton("doctor", ...pg)
      expect(doctor.code, doctor.stdout).toBe(0)
      expect((await baton("run", "run-99", ...pg)).code).toBe(3)
    } finally {
      await PgSchema.dropAndDispose(runtime, schema)
    }
  }, 120_000)
})
