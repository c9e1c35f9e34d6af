import { describe } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { staleOwnerSuite } from "./suites/stale-owner.js"

describe("stale owner fenced out (SQLite file, real time)", () =>
  staleOwnerSuite(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "run-store-stale-"))
    return { args: ["sqlite", path.join(dir, "runs.db")], dispose: async () => fs.rmSync(dir, { recursive: true }) }
  }))
