/**
 * node.md 6.1/6.3 for arguments and keys: malformed `--key` and `--schema` values and flow inputs are
 * usage (2) before the database is looked at, a key reused for another request is `Conflict` (4) on every
 * verb, `--help` after global options shows the help, and `baton run` says when a run has no result.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { baton, configModule, exampleDatabase, migratedDatabase, snapshot, tempDir } from "./cli-support.js"
import { expectCompleted, launch } from "./fixtures/runtimeSupport.js"

const planIdOf = (stdout: string) => (JSON.parse(stdout) as { planId: string }).planId
const runIdOf = (stdout: string) => (JSON.parse(stdout) as { runId: string }).runId

const conflict = (key: string, what: string) =>
  `baton: idempotency key ${key} was used for another ${what}\nhint: pass another --key, or repeat the first request to replay it\n`

describe("cli arguments and keys", () => {
  it("a flow input the catalog's schema refuses is usage (2) even when the database file is missing; nothing is created", async () => {
    const dir = tempDir()
    const missing = path.join(dir, "none.db")
    const result = await baton("plan", "index-dir", "--input", `{"root":"${dir}","batchFiles":0}`, "--db", missing, "--config", configModule)
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/^baton: input for index-dir rejected: input\.batchFiles: must be /)
    expect(fs.readdirSync(dir)).toEqual([])
  })

  it("--schema is usage (2) on SQLite and when malformed, before anything is opened", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    await migratedDatabase(db)
    const before = snapshot(dir)
    const sqlite = await baton("runs", "--schema", "foo", "--db", db)
    expect(sqlite.code).toBe(2)
    expect(sqlite.stderr).toBe(
      "baton: --schema applies to PostgreSQL only; a SQLite database (--db) has no schemas\nhint: pass --pg <url> with --schema, or drop --schema\n"
    )
    // Nothing listens on port 1: reaching the database would be exit 5.
    for (const schema of ["", "x\"; drop table runs; --", "Upper", "1abc"]) {
      const result = await baton("runs", "--pg", "postgres://nobody@127.0.0.1:1/none", "--schema", schema)
      expect(result.code, schema).toBe(2)
      expect(result.stderr, schema).toBe(
        `baton: --schema must be 1 to 63 characters of a-z, 0-9 and _, not starting with a digit; got ${JSON.stringify(schema)}\n`
      )
    }
    expect(snapshot(dir)).toEqual(before)
  })

  it("a --config migration set the ledger would refuse is usage (2) naming the field; no file is created or changed", async () => {
    const dir = tempDir()
    const config = path.join(tempDir(), "bad-namespace.mjs")
    fs.writeFileSync(config, "export const migrations = [{ namespace: \"\", idOffset: 20000, migrations: {} }]\n")
    const missing = await baton("plan", "index-dir", "--db", path.join(dir, "none.db"), "--config", config)
    expect(missing.code).toBe(2)
    expect(missing.stderr).toBe(
      `baton: invalid flow catalog ${config}: migrations[0]: invalid migration namespace ""\n`
    )
    expect(fs.readdirSync(dir)).toEqual([])
    const db = path.join(dir, "baton.db")
    await migratedDatabase(db)
    const before = snapshot(dir)
    const existing = await baton("doctor", "--fix", "--db", db, "--config", config)
    expect(existing.code).toBe(2)
    expect(existing.stderr).toContain("migrations[0]: invalid migration namespace \"\"")
    expect(snapshot(dir)).toEqual(before)
  })

  it("an empty or malformed --key is usage (2) naming --key on every verb that takes one; nothing is created", async () => {
    const dir = tempDir()
    const missing = path.join(dir, "none.db")
    const verbs = [
      ["plan", "index-dir", "--input", `{"root":"${dir}"}`],
      ["approve", "plan-1"],
      ["deny", "plan-1"],
      ["launch", "plan-1"],
      ["cancel", "run-1"],
      ["resume", "run-1"],
      ["signal", "run-1", "go"]
    ]
    for (const verb of verbs) {
      for (const [key, rule] of [["", "must not be empty"], ["a\u0000b", "must not contain a NUL byte"]] as const) {
        const result = await baton(...verb, "--key", key, "--db", missing, "--config", configModule)
        expect(result.code, `${verb[0]} ${JSON.stringify(key)}`).toBe(2)
        expect(result.stderr, verb[0]).toBe(`baton: --key ${rule}\n`)
      }
    }
    expect(fs.readdirSync(dir)).toEqual([])
  }, 60_000)

  it("a key reused for another request is Conflict (4) on plan, approve, deny, launch, cancel, resume and signal; the first request stands", async () => {
    const { cli, root } = await exampleDatabase()
    const input = (batchFiles: number) => JSON.stringify({ root, batchFiles })
    const plan1 = await cli("plan", "index-dir", "--input", input(1), "--key", "p1", "--json")
    expect(plan1.code, plan1.stderr).toBe(0)
    const plans = (await cli("plans", "--json")).stdout
    const reused = await cli("plan", "index-dir", "--input", input(2), "--key", "p1")
    expect(reused.code).toBe(4)
    expect(reused.stderr).toBe(conflict("p1", "plan"))
    expect((await cli("plans", "--json")).stdout).toBe(plans)
    const json = await cli("plan", "index-dir", "--input", input(2), "--key", "p1", "--json")
    expect(json.code).toBe(4)
    expect(JSON.parse(json.stdout)).toEqual({
      error: { code: "conflict", message: "idempotency key p1 was used for another plan", exitCode: 4 }
    })

    const planA = planIdOf(plan1.stdout)
    const planB = planIdOf((await cli("plan", "index-dir", "--input", input(3), "--json")).stdout)
    const planC = planIdOf((await cli("plan", "index-dir", "--input", input(4), "--json")).stdout)
    expect((await cli("approve", planA, "--key", "a1")).code).toBe(0)
    const approve = await cli("approve", planB, "--key", "a1")
    expect(approve.code).toBe(4)
    expect(approve.stderr).toBe(conflict("a1", "mutation"))
    expect((await cli("deny", planC, "--key", "d1")).code).toBe(0)
    const deny = await cli("deny", planB, "--key", "d1")
    expect(deny.code).toBe(4)
    expect(deny.stderr).toBe(conflict("d1", "mutation"))
    expect((await cli("approve", planB)).code).toBe(0)

    const run1 = runIdOf((await cli("launch", planA, "--key", "l1", "--json")).stdout)
    const launch = await cli("launch", planB, "--key", "l1")
    expect(launch.code).toBe(4)
    expect(launch.stderr).toBe(conflict("l1", "mutation"))
    const run2 = runIdOf((await cli("launch", planB, "--json")).stdout)

    expect((await cli("signal", run1, "go", "1", "--key", "s1")).code).toBe(0)
    const otherPayload = await cli("signal", run1, "go", "2", "--key", "s1")
    expect(otherPayload.code).toBe(4)
    expect(otherPayload.stderr).toBe(conflict("s1", "mutation"))
    const otherRun = await cli("signal", run2, "go", "1", "--key", "s1")
    expect(otherRun.code).toBe(4)
    expect(otherRun.stderr).toBe(conflict("s1", "mutation"))

    expect((await cli("cancel", run1, "--key", "c1")).code).toBe(0)
    const cancel = await cli("cancel", run2, "--key", "c1")
    expect(cancel.code).toBe(4)
    expect(cancel.stderr).toBe(conflict("c1", "mutation"))
    const resumed = await cli("resume", run2, "--key", "r1")
    expect(resumed.code, resumed.stderr).toBe(0)
    const resume = await cli("resume", run2, "--key", "r1", "--allow-code-drift")
    expect(resume.code).toBe(4)
    expect(resume.stderr).toBe(conflict("r1", "mutation"))
    expect((await cli("run", run2, "--json")).stdout).toContain(`"status":"accepted"`)
  }, 120_000)

  it("--help after global options shows the help (exit 0)", async () => {
    const result = await baton("--db", "x.db", "--config", configModule, "--json", "--help")
    expect(result.code).toBe(0)
    expect(result.stdout).toContain("COMMANDS")
    expect(result.stderr).toBe("")
  })

  it.live("baton run shows `result (none)` for a run whose handler returned nothing, like --json has no value", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const db = path.join(dir, "baton.db")
      const quiet = Flow.make({ id: "quiet", description: "returns nothing", input: Schema.Struct({}), handler: () => Effect.void })
      const runId = yield* Effect.provide(
        Effect.tap(launch("quiet", {}), expectCompleted),
        NodeRuntime.layer({ filename: db, flows: [quiet], pollInterval: "100 millis", shutdownGrace: "2 seconds", drainTimeout: "1 second" })
      )
      const table = yield* Effect.promise(() => baton("run", runId, "--db", db))
      expect(table.code, table.stderr).toBe(0)
      expect(table.stdout).toMatch(/^result\s+\(none\)$/m)
      expect(table.stdout).not.toContain("{}")
    }), 60_000)
})

