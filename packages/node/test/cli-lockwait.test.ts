/**
 * Read verbs honour `--lock-wait` while another process holds an EXCLUSIVE lock on the file (node.md 6.1,
 * 6.3): exit 5 with the `locked` message and its hint, not the open ladder's own give-up.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { baton, configModule, migratedDatabase, tempDir } from "./cli-support.js"

const databasePackage = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../database/package.json")

// A plain better-sqlite3 connection in EXCLUSIVE locking mode inside an open exclusive transaction:
// nobody else can even read until it exits.
const holderSource = `
const Sqlite = require("node:module").createRequire(process.argv[1])("better-sqlite3")
const db = new Sqlite(process.argv[2], { fileMustExist: true })
db.pragma("locking_mode = EXCLUSIVE")
db.exec("BEGIN EXCLUSIVE")
db.exec("CREATE TABLE IF NOT EXISTS lock_probe (n INTEGER)")
process.stdout.write("locked\\n")
process.stdin.on("data", () => {})
process.stdin.on("end", () => process.exit(0))
`

describe("cli --lock-wait on reads", () => {
  it("runs, run and journal give up after --lock-wait with exit 5, the locked message and the hint", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    await migratedDatabase(db)
    const holder = spawn(process.execPath, ["-e", holderSource, databasePackage, db], { stdio: ["pipe", "pipe", "inherit"] })
    const exited = new Promise<number | null>((resolve) => holder.on("exit", (code) => resolve(code)))
    try {
      await new Promise<void>((resolve, reject) => {
        let out = ""
        holder.stdout.on("data", (chunk) => {
          out += String(chunk)
          if (out.includes("locked")) resolve()
        })
        holder.on("exit", () => reject(new Error("the lock holder exited early")))
      })
      for (const args of [["runs"], ["run", "run-1"], ["journal", "run-1"], ["plans"]]) {
        const result = await baton(...args, "--db", db, "--config", configModule, "--lock-wait", "1s")
        expect(result.code, `${args[0]}: ${result.stderr}`).toBe(5)
        expect(result.stderr).toBe(
          `baton: ${db} is locked by another writer; gave up after 1 s\nhint: retry, or raise --lock-wait\n`
        )
      }
      const json = await baton("runs", "--db", db, "--lock-wait", "1s", "--json")
      expect(json.code).toBe(5)
      expect(JSON.parse(json.stdout)).toEqual({
        error: { code: "locked", message: `${db} is locked by another writer; gave up after 1 s`, exitCode: 5 }
      })
    } finally {
      holder.stdin.end()
      await exited
    }
    const after = await baton("runs", "--db", db, "--config", configModule)
    expect(after.code, after.stderr).toBe(0)
    expect(after.stdout).toContain("No runs.")
  }, 60_000)
})
