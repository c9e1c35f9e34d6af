/**
 * node.md 6.3: an empty or malformed run, plan or request id is a usage error (exit 2) naming the
 * argument, on every verb taking one, before the database is opened; never "not found" (3).
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { baton, migratedDatabase, snapshot, tempDir } from "./cli-support.js"

const bad: ReadonlyArray<readonly [string, string, string]> = [
  ["empty", "", "must not be empty"],
  ["NUL", "run\u00001", "must not contain a NUL byte"],
  ["lone surrogate", "run-\uD800", "must not contain an unpaired UTF-16 surrogate"],
  ["over-long", "r".repeat(1025), "must be at most 1024 characters, got 1025"]
]

/** Every verb taking an id, with the argument named in the message. */
const verbs = (id: string): ReadonlyArray<readonly [string, ReadonlyArray<string>]> => [
  ["runId", ["run", id]],
  ["runId", ["journal", id]],
  ["runId", ["cancel", id]],
  ["runId", ["resume", id]],
  ["runId", ["signal", id, "go"]],
  ["planId", ["launch", id]],
  ["runId", ["approve", `${id}:req-1`]],
  ["requestId", ["deny", `run-1:${id}`]]
]

describe("cli id arguments", () => {
  for (const [name, id, rule] of bad) {
    it(`${name} ids exit 2 naming the argument on every verb, on a migrated database left unchanged`, async () => {
      const dir = tempDir()
      const db = path.join(dir, "baton.db")
      await migratedDatabase(db)
      const before = snapshot(dir)
      for (const [argument, args] of verbs(id)) {
        const result = await baton(...args, "--db", db)
        expect({ args: args[0], code: result.code, stderr: result.stderr }).toEqual({
          args: args[0],
          code: 2,
          stderr: `baton: ${argument} ${rule}\n`
        })
      }
      expect(snapshot(dir)).toEqual(before)
    })
  }

  it("the id check comes before the file check: no database is needed to be told the id is bad", async () => {
    const dir = tempDir()
    const result = await baton("run", "", "--db", path.join(dir, "missing.db"), "--json")
    expect(result.code).toBe(2)
    expect(JSON.parse(result.stdout)).toEqual({ error: { code: "invalid_id", message: "runId must not be empty", exitCode: 2 } })
    expect(fs.readdirSync(dir)).toEqual([])
  })

  it("approve with a bare plan id checks it as planId; an empty half of runId:requestId is a usage error", async () => {
    const dir = tempDir()
    const db = path.join(dir, "baton.db")
    await migratedDatabase(db)
    const plan = await baton("approve", "plan\u0000", "--db", db)
    expect([plan.code, plan.stderr]).toEqual([2, "baton: planId must not contain a NUL byte\n"])
    const half = await baton("approve", "run-1:", "--db", db)
    expect([half.code, half.stderr]).toEqual([2, "baton: requestId must not be empty\n"])
    const fine = await baton("run", "run-404", "--db", db)
    expect(fine.code).toBe(3)
  })
})
