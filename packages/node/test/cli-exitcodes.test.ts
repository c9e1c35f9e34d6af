/**
 * node.md 6.3's exit-code table: bad arguments are usage (2) before the database is looked at, a
 * malformed --pg URL is usage naming --pg, and `pnpm start -- --resume <unknown run>` is not found (3).
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { completion, spawnFixture } from "../../database/test/support/processes.js"
import { baton, configModule, migratedDatabase, snapshot, tempDir } from "./cli-support.js"

const startScript = fileURLToPath(new URL("../../../scripts/start.ts", import.meta.url))

describe("cli exit codes", () => {
  it("bad arguments answer 2 even when the database file is missing, and create nothing", async () => {
    const dir = tempDir()
    const missing = path.join(dir, "missing.db")
    const badJson = await baton("plan", "index-dir", "--input", "{bad", "--db", missing, "--config", configModule)
    expect(badJson.code).toBe(2)
    expect(badJson.stderr).toMatch(/^baton: --input is not valid JSON: /)
    const unknownFlow = await baton("plan", "nope", "--input", "{}", "--db", missing, "--config", configModule)
    expect(unknownFlow.code).toBe(2)
    expect(unknownFlow.stderr).toBe(`baton: flow "nope" is not registered here (known: index-dir)\n`)
    const badPayload = await baton("signal", "run-1", "go", "{bad", "--db", missing)
    expect(badPayload.code).toBe(2)
    expect(badPayload.stderr).toMatch(/^baton: signal payload is not valid JSON: /)
    // The argument checks passed (the input is one the flow's schema accepts): the missing file is still exit 5.
    const good = await baton("plan", "index-dir", "--input", `{"root":"."}`, "--db", missing, "--config", configModule)
    expect(good.code).toBe(5)
    expect(good.stderr).toContain(`no database at ${missing}`)
    expect(fs.readdirSync(dir)).toEqual([])
  })

  it("a flow catalog that fails to load, or exports the wrong shapes, is usage (2) naming the field; nothing is written", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    await migratedDatabase(db)
    const modules: Record<string, [source: string, message: string]> = {
      "throws.mjs": ["throw new Error(\"boom\")", "cannot load the flow catalog"],
      "flows-number.mjs": ["export const flows = 42", "flows: must be an array of flows made with Flow.make"],
      "flows-shape.mjs": ["export const flows = [{ id: \"x\" }]", "flows[0]: must be a flow made with Flow.make"],
      "migrations.mjs": ["export const migrations = \"0001\"", "migrations: must be an array of migration sets"],
      "offset.mjs": ["export const migrations = [{ idOffset: 5 }]", "migrations[0].idOffset: application migration sets must use an idOffset of 10000 or more"],
      "principal.mjs": ["export const principal = { id: \"\", kind: \"operator\" }", "principal: id and kind must be non-empty strings"],
      "default.mjs": ["export default 5", "the module must export flows, migrations, approvalAuthority or principal"]
    }
    const configs = tempDir()
    for (const [name, [source]] of Object.entries(modules)) fs.writeFileSync(path.join(configs, name), source + "\n")
    const before = snapshot(dir)
    for (const [name, [, message]] of Object.entries(modules)) {
      const file = path.join(configs, name)
      for (const verb of [["runs"], ["plan", "index-dir", "--input", "{}"]]) {
        const result = await baton(...verb, "--db", db, "--config", file)
        expect(result.code, `${name} ${verb[0]}`).toBe(2)
        expect(result.stderr, name).toContain(message)
        expect(result.stderr, name).toContain(file)
      }
    }
    expect(snapshot(dir)).toEqual(before)
  }, 120_000)

  it("a malformed --pg URL is usage (2) naming --pg", async () => {
    for (const value of ["not a url", "postgres://u@[bad/d"]) {
      const result = await baton("runs", "--pg", value)
      expect(result.code, value).toBe(2)
      expect(result.stderr, value).toMatch(/^baton: --pg /)
    }
    const json = await baton("runs", "--pg", "not a url", "--json")
    expect(JSON.parse(json.stdout)).toEqual({
      error: { code: "wrong_dialect", message: `--pg needs a postgres:// or postgresql:// URL, got "not a url"`, exitCode: 2 }
    })
  })

  it("pnpm start -- --resume of an unknown run exits 3", async () => {
    const db = path.join(tempDir(), "baton.db")
    await migratedDatabase(db)
    const result = await completion(spawnFixture(startScript, ["--", "--resume", "run-999", "--db", db]))
    expect(result.stderr).toContain(`run "run-999" not found in ${db}`)
    expect(result.code).toBe(3)
  }, 60_000)
})
