import { describe } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { processSuite } from "./suites/processes.js"

const sqliteFile = async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "run-store-procs-"))
  return {
    args: ["sqlite", path.join(dir, "runs.db")],
    dispose: async () => fs.rmSync(dir, { recursive: true, force: true })
  }
}

describe.concurrent("separate processes on one SQLite file", () => processSuite(sqliteFile, 500), { timeout: 300_000 })
