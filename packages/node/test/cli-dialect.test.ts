/**
 * node.md 6.3: a database address given to the wrong flag is answered in CLI terms (`--db <file>`,
 * `--pg <url>`), never with the library's advice (`use SqliteDatabase.layer`), and opens nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { baton, tempDir } from "./cli-support.js"

describe("cli wrong-dialect hints", () => {
  it("--pg with a file path says to use --db <file>", async () => {
    const dir = tempDir()
    const file = path.join(dir, "x.db")
    for (const verb of [["runs"], ["run", "run-1"], ["cancel", "run-1"]]) {
      const result = await baton(...verb, "--pg", file)
      expect(result.code).toBe(2)
      expect(result.stderr).toBe(
        "baton: --pg needs a postgres:// or postgresql:// URL, got a file path\nhint: for a SQLite database file, use --db <file>\n"
      )
      expect(result.stderr).not.toContain("SqliteDatabase")
    }
    expect(fs.readdirSync(dir)).toEqual([])
  })

  it("--pg with another scheme names the scheme and hints --db", async () => {
    const result = await baton("runs", "--pg", "mysql://u@h/d", "--json")
    expect(result.code).toBe(2)
    expect(JSON.parse(result.stdout)).toEqual({
      error: { code: "wrong_dialect", message: "--pg needs a postgres:// or postgresql:// URL, got a mysql:// URL", exitCode: 2 }
    })
  })

  it("--db with a PostgreSQL URL says to use --pg, redacts the password and creates nothing", async () => {
    const dir = tempDir()
    const before = fs.readdirSync(process.cwd())
    const result = await baton("runs", "--db", "postgres://u:secret@127.0.0.1:1/d")
    expect(result.code).toBe(2)
    expect(result.stderr).toBe(
      "baton: --db takes a SQLite database file, but postgres://u:***@127.0.0.1:1/d is a PostgreSQL URL\nhint: pass the URL with --pg <url>\n"
    )
    expect(result.stderr).not.toContain("secret")
    expect(fs.readdirSync(process.cwd())).toEqual(before)
    expect(fs.readdirSync(dir)).toEqual([])
  })
})
