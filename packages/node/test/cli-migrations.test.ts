/**
 * A CLI catalog's application migrations go only to databases that already have that application's block
 * (or that the CLI initialises for it): a database made by another flow catalog gets no `index_dir_files`,
 * and doctor reports nothing pending for it.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { createRequire } from "node:module"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as NodeRuntime from "../src/NodeRuntime.js"
import { baton, configModule, migratedDatabase, tempDir } from "./cli-support.js"

const Sqlite = createRequire(fileURLToPath(new URL("../../database/package.json", import.meta.url)))("better-sqlite3") as new(
  file: string,
  options: { readonly readonly: boolean }
) => { prepare: (text: string) => { all: () => Array<{ name: string }> }; close: () => void }

const tables = (file: string): Array<string> => {
  const db = new Sqlite(file, { readonly: true })
  try {
    return db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all().map((r) => r.name)
  } finally {
    db.close()
  }
}

/** A database made by another application: its own migration block `greet`. */
const greetDatabase = (filename: string) =>
  Effect.runPromise(Effect.void.pipe(Effect.provide(Layer.orDie(NodeRuntime.layer({
    filename,
    mode: "client",
    migrations: [{
      namespace: "greet",
      idOffset: 20_000,
      migrations: {
        "0001_greetings": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE greet_greetings (name TEXT NOT NULL)`)
      }
    }]
  })))))

describe("cli application migrations", () => {
  it("a database of another catalog: mutating verbs add no index_dir_files and doctor reports nothing pending", async () => {
    const db = path.join(tempDir(), "greet.db")
    await greetDatabase(db)
    expect(tables(db)).toContain("greet_greetings")
    const cli = (...args: ReadonlyArray<string>) => baton(...args, "--db", db, "--config", configModule)
    const cancel = await cli("cancel", "run-1")
    expect(cancel.code).toBe(3)
    const resume = await cli("resume", "run-1")
    expect(resume.code).toBe(3)
    const deny = await cli("deny", "plan-1")
    expect(deny.code).toBe(3)
    expect(tables(db)).not.toContain("index_dir_files")
    const doctor = await cli("doctor")
    expect(doctor.code, doctor.stdout).toBe(0)
    expect(doctor.stdout).not.toContain("pending")
    expect(doctor.stdout).not.toContain("index-dir")
    expect(doctor.stdout).toContain("foreign blocks: greet (not in the loaded catalog)")
  })

  it("the example's own database and a 0-byte file the CLI initialises get the example's migration", async () => {
    const dir = tempDir()
    const own = path.join(dir, "own.db")
    await migratedDatabase(own)
    const doctor = await baton("doctor", "--db", own, "--config", configModule)
    expect(doctor.code, doctor.stdout).toBe(0)
    expect(doctor.stdout).toMatch(/ledger\s.*none pending/)
    const fresh = path.join(dir, "fresh.db")
    fs.writeFileSync(fresh, "")
    const planned = await baton("plan", "index-dir", "--input", JSON.stringify({ root: dir }), "--db", fresh, "--config", configModule)
    expect(planned.code, planned.stderr).toBe(0)
    expect(tables(fresh)).toContain("index_dir_files")
  })
})
