/**
 * The main job survives the death of its owner (issue 6 must-hold; node.md checks 16 and 17): two worker
 * processes on one SQLite file, a few thousand real files, the owning worker SIGKILLed (or SIGTERMed) at
 * an arbitrary point; the run completes with every file indexed exactly once (example-crash-scenario.ts).
 */
import { describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { crashScenario } from "./example-crash-scenario.js"
import * as Support from "./example-support.js"

const sqlite = async (signal: "SIGKILL" | "SIGTERM") => {
  const db = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "baton-crash-")), "baton.db")
  const runtime = Support.clientRuntime(db)
  try {
    await crashScenario(signal, { runtime, spawn: (label, trace) => Support.spawnWorker(db, label, trace) })
  } finally {
    await runtime.dispose()
  }
}

describe("index-dir under worker death", () => {
  it("SIGKILL of the owning worker: the other worker takes over and every file is indexed once", () => sqlite("SIGKILL"), 600_000)
  it("SIGTERM of the owning worker: it releases the run and the other worker finishes it", () => sqlite("SIGTERM"), 600_000)
})
