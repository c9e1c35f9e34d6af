/**
 * node.md checks 21, 22, 24: the CLI on a missing file, an empty database, another application's file,
 * a text file, and bad input — exit codes, messages, and nothing written.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { baton, configModule, migratedDatabase, snapshot, tempDir } from "./cli-support.js"

const readVerbs = (db: string) => [
  ["runs", "--db", db],
  ["run", "run-1", "--db", db],
  ["plans", "--db", db],
  ["journal", "run-1", "--db", db],
  ["doctor", "--db", db]
]
const writeVerbs = (db: string) => [
  ["cancel", "run-1", "--db", db],
  ["approve", "plan-1", "--db", db],
  ["deny", "plan-1", "--db", db],
  ["launch", "plan-1", "--db", db],
  ["resume", "run-1", "--db", db],
  ["signal", "run-1", "go", "--db", db],
  // An input the flow's schema accepts: a refused one is usage (2), checked before the file (node.md 6.1).
  ["plan", "index-dir", "--input", `{"root":"."}`, "--config", configModule, "--db", db]
]

describe("cli on files that are not a usable database", () => {
  it("a missing file: every verb exits 5 naming the path, creating no file or sidecar", async () => {
    const dir = tempDir()
    const db = path.join(dir, "missing.db")
    for (const args of [...readVerbs(db), ...writeVerbs(db)]) {
      const result = await baton(...args)
      expect(result.code, args.join(" ")).toBe(5)
      expect(result.stderr).toContain(`no database at ${db}`)
      expect(result.stderr).toContain("hint: a host creates it (pnpm start), or pass --db <file>")
    }
    const json = await baton("runs", "--db", db, "--json")
    expect(JSON.parse(json.stdout)).toEqual({ error: { code: "not_found", message: `no database at ${db}`, exitCode: 5 } })
    expect(fs.readdirSync(dir)).toEqual([])
  })

  it("another application's SQLite file: every verb exits 5 and the file stays byte-identical", async () => {
    const dir = tempDir()
    const db = path.join(dir, "foreign.db")
    // A real SQLite file written by another program (the sqlite3 driver Python ships), in rollback mode.
    const made = spawnSync("python3", ["-c", `import sqlite3; c = sqlite3.connect(${JSON.stringify(db)}); c.execute("create table users (id integer primary key, name text)"); c.execute("insert into users (name) values ('ada')"); c.commit(); c.close()`])
    expect(made.status).toBe(0)
    const before = snapshot(dir)
    for (const args of [...readVerbs(db), ...writeVerbs(db)]) {
      const result = await baton(...args)
      expect(result.code, args.join(" ")).toBe(5)
      expect(result.stderr).toContain(`${db} already holds another application's tables`)
    }
    expect(snapshot(dir)).toEqual(before)
  })

  it("a text file: exit 5, is not a SQLite database", async () => {
    const dir = tempDir()
    const db = path.join(dir, "notes.db")
    fs.writeFileSync(db, "not a database\n")
    const before = snapshot(dir)
    for (const args of [...readVerbs(db), ...writeVerbs(db)]) {
      const result = await baton(...args)
      expect(result.code, args.join(" ")).toBe(5)
      expect(result.stderr).toContain(`${db} is not a SQLite database`)
    }
    expect(snapshot(dir)).toEqual(before)
  })

  it("a 0-byte file is an empty database for reads", async () => {
    const dir = tempDir()
    const db = path.join(dir, "empty.db")
    fs.writeFileSync(db, "")
    expect(await baton("runs", "--db", db)).toMatchObject({ code: 0, stdout: "No runs.\n" })
    expect(await baton("plans", "--db", db)).toMatchObject({ code: 0, stdout: "No plans.\n" })
    expect((await baton("doctor", "--db", db)).code).toBe(0)
    expect((await baton("run", "run-1", "--db", db)).code).toBe(3)
    expect(fs.readdirSync(dir)).toEqual(["empty.db"])
    expect(fs.statSync(db).size).toBe(0)
  })
})

describe("cli on a migrated empty database", () => {
  it("lists nothing, passes doctor, and answers 3 for named runs and plans", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    await migratedDatabase(db)
    expect(await baton("runs", "--db", db)).toMatchObject({ code: 0, stdout: "No runs.\n" })
    const json = await baton("runs", "--db", db, "--json")
    expect(json.code).toBe(0)
    expect(JSON.parse(json.stdout)).toEqual({ _tag: "runs", items: [] })
    expect(await baton("plans", "--db", db)).toMatchObject({ code: 0, stdout: "No plans.\n" })
    const doctor = await baton("doctor", "--db", db)
    expect(doctor.code, doctor.stdout + doctor.stderr).toBe(0)
    expect(doctor.stdout).not.toContain("FAIL")
    const missingRun = await baton("run", "run-1", "--db", db)
    expect(missingRun.code).toBe(3)
    expect(missingRun.stderr).toContain(`run "run-1" not found in ${db}`)
    expect((await baton("journal", "run-1", "--db", db)).code).toBe(3)
    expect((await baton("cancel", "run-1", "--db", db)).code).toBe(3)
    expect((await baton("approve", "plan-1", "--db", db)).code).toBe(3)
  })

  it("bad input is a usage error naming the problem, and writes nothing", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    await migratedDatabase(db)
    const plans = async () => JSON.parse((await baton("plans", "--db", db, "--json")).stdout)
    const before = await plans()
    const badJson = await baton("plan", "index-dir", "--config", configModule, "--input", "{root:", "--db", db)
    expect(badJson.code).toBe(2)
    expect(badJson.stderr).toMatch(/--input is not valid JSON: /)
    const badRoot = await baton("plan", "index-dir", "--config", configModule, "--input", '{"root":5}', "--db", db)
    expect(badRoot.code).toBe(2)
    expect(badRoot.stderr).toMatch(/input for index-dir rejected: .*root/s)
    const unknownFlow = await baton("plan", "nope", "--config", configModule, "--db", db)
    expect(unknownFlow.code).toBe(2)
    expect(unknownFlow.stderr).toContain('flow "nope" is not registered here (known: index-dir)')
    const status = await baton("runs", "--status", "bogus", "--db", db)
    expect(status.code).toBe(2)
    expect(status.stderr).toContain("accepted, running, parked, waiting-approval, cancelled, completed, failed")
    expect((await baton("runs", "--since", "yesterday", "--db", db)).code).toBe(2)
    expect((await baton("run", "nope", "--db", db)).code).toBe(3)
    expect((await baton("approve", "plan-999", "--db", db)).code).toBe(3)
    const both = await baton("runs", "--db", "x.db", "--pg", "postgres://localhost/x")
    expect(both.code).toBe(2)
    expect(both.stderr).toContain("--db and --pg are mutually exclusive")
    const unknownVerb = await baton("frobnicate", "--db", db)
    expect(unknownVerb.code).toBe(2)
    expect(await plans()).toEqual(before)
    expect(fs.existsSync(path.join(process.cwd(), "x.db"))).toBe(false)
  })

  it("a database from a newer build and one with an older schema: exit 5 with the ledger's words", async () => {
    const dir = tempDir()
    const newer = path.join(dir, "newer.db")
    await migratedDatabase(newer)
    // A later control migration this build does not know.
    const ahead = spawnSync("python3", ["-c", `import sqlite3; c = sqlite3.connect(${JSON.stringify(newer)}); c.execute("insert into flows_migrations values (2999, 'control', 'future', 0)"); c.commit(); c.close()`])
    expect(ahead.status, String(ahead.stderr)).toBe(0)
    for (const args of [["runs"], ["cancel", "run-1"]]) {
      const result = await baton(...args, "--db", newer)
      expect(result.code, args.join(" ")).toBe(5)
      expect(result.stderr).toContain("the database is ahead of this build")
    }
    const older = path.join(dir, "older.db")
    await migratedDatabase(older)
    // As if written before control's migrations existed (its tables are already there; only the
    // ledger rows are missing, which is what a read verb inspects).
    const behind = spawnSync("python3", ["-c", `import sqlite3; c = sqlite3.connect(${JSON.stringify(older)}); c.execute("delete from flows_migrations where namespace = 'control'"); c.commit(); c.close()`])
    expect(behind.status, String(behind.stderr)).toBe(0)
    const read = await baton("runs", "--db", older)
    expect(read.code).toBe(5)
    // Control's whole set is missing (all three of its migrations): named as a missing set, not an older schema.
    expect(read.stderr).toContain(`${older} lacks the control migration set (4 migrations pending); any mutating command or a host start applies them`)
    const doctor = await baton("doctor", "--db", older)
    expect(doctor.stderr).toContain("lacks the control migration set")
  })
})
