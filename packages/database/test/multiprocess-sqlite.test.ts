/**
 * Several OS processes on one SQLite file (checks 22, 25 and the must-holds):
 * read-then-increment writes serialize with no busy reaching a caller, a waiting
 * writer keeps its event loop running, and concurrent migration passes apply each
 * migration once.
 */
import * as Migrations from "@baton/database/Migrations"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import { afterAll, describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { counterSet } from "./fixtures/counterSet.js"
import { events, lastLine } from "./fixtures/events.js"
import { removeTempDirs, tempDir } from "./fixtures/files.js"
import { completion, spawnFixture } from "./support/processes.js"

afterAll(removeTempDirs)

const fixture = (name: string) => new URL(`./fixtures/${name}.ts`, import.meta.url)

/** A migrated Baton file with the counter at 0. */
const counterFile = async () => {
  const filename = path.join(tempDir(), "counter.db")
  await Effect.runPromise(Effect.provide(Migrations.run([counterSet]), SqliteDatabase.layer({ filename })))
  return filename
}

const readCounter = (filename: string): number => {
  const db = new Sqlite(filename, { readonly: true })
  try {
    return (db.prepare("SELECT value FROM counter WHERE id = 1").get() as { value: number }).value
  } finally {
    db.close()
  }
}

describe("multi-process SQLite", () => {
  it("4 processes x 500 read-then-increment writes end at exactly 2000 with no busy reaching a caller", async () => {
    const filename = await counterFile()
    const children = Array.from({ length: 4 }, () =>
      spawnFixture(fixture("counter-writes"), [
        JSON.stringify({ target: { dialect: "sqlite", filename }, writes: 500 })
      ]))
    const results = await Promise.all(children.map(completion))
    for (const result of results) {
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
      expect(lastLine<{ failures: Array<string> }>(result.stdout).failures).toEqual([])
    }
    expect(readCounter(filename)).toBe(2000)
    // The processes really contended: at least one write was replayed after busy.
    const retries = results.map((result) => lastLine<{ retries: number }>(result.stdout).retries)
    expect(retries.reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
  }, 240_000)

  it("a writer waiting 2 s for another process's write lock keeps its event loop running and commits after the release", async () => {
    const filename = await counterFile()
    const releaseFile = path.join(path.dirname(filename), "release")
    const holder = spawnFixture(fixture("sqlite-lock-holder"), [
      JSON.stringify({ filename, mode: "immediate", holdMs: -1, bumpCounter: true, releaseFile })
    ])
    const holderEvents = events(holder)
    const holderDone = completion(holder)
    await holderEvents.next("locked")
    const waiter = spawnFixture(fixture("sqlite-waiting-writer"), [JSON.stringify({ filename, intervalMs: 10 })])
    const waiterEvents = events(waiter)
    // Hold the lock for 2 s after the waiter started its write.
    await waiterEvents.next("writing")
    await new Promise((resolve) => setTimeout(resolve, 2000))
    fs.writeFileSync(releaseFile, "")
    const [waiterResult, holderResult] = await Promise.all([completion(waiter), holderDone])
    expect(holderResult.code).toBe(0)
    expect(waiterResult.stderr).toBe("")
    expect(waiterResult.code).toBe(0)
    const committed = await waiterEvents.next("committed")
    // The write read the holder's committed bump: it ran after the release.
    expect(committed["read"]).toBe(1000)
    expect(readCounter(filename)).toBe(1001)
    // Liveness, not speed: the 10 ms timer kept firing while the write waited ~2 s. A
    // blocked loop would show one gap as long as the wait; time the thread spent
    // runnable in the OS run queue (a loaded shared machine) is not blocking.
    expect(committed["waitedMs"] as number).toBeGreaterThan(1000)
    expect(committed["ticks"] as number).toBeGreaterThan(20)
    expect(committed["maxBlockedMs"] as number, JSON.stringify(committed["gaps"])).toBeLessThan(100)
    expect(committed["maxGapMs"] as number).toBeLessThan(1000)
  }, 60_000)

  it("two processes migrating one fresh file at once both succeed and each migration runs once", async () => {
    const dir = tempDir()
    const filename = path.join(dir, "fresh.db")
    const logFile = path.join(dir, "log.txt")
    const releaseFile = path.join(dir, "release")
    fs.writeFileSync(logFile, "")
    const spawnPass = (tag: string) =>
      spawnFixture(fixture("migrate"), [
        JSON.stringify({ target: { dialect: "sqlite", filename }, tag, logFile, releaseFile })
      ])
    const a = spawnPass("a")
    const b = spawnPass("b")
    const done = Promise.all([completion(a), completion(b)])
    // Release migration 1 only once it is running and both processes have opened the file.
    const deadline = Date.now() + 60_000
    const lines = () => fs.readFileSync(logFile, "utf8").trim().split("\n")
    while (!(lines().includes("a open") && lines().includes("b open") && lines().some((l) => l.endsWith(" m1")))) {
      if (Date.now() > deadline) throw new Error(`migration 1 never started: ${lines().join(", ")}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await new Promise((resolve) => setTimeout(resolve, 300))
    fs.writeFileSync(releaseFile, "")
    const results = await done
    for (const result of results) {
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
    }
    const applied = results.map((result) => lastLine<{ applied: Array<number> }>(result.stdout).applied)
    expect(applied.slice().sort((x, y) => y.length - x.length)).toEqual([[10001, 10002, 10003], []])
    const migrationLines = lines().filter((line) => / m\d$/.test(line)).map((line) => line.slice(2))
    expect(migrationLines).toEqual(["m1", "m2", "m3"])
    const db = new Sqlite(filename, { readonly: true })
    const ledger = db.prepare("SELECT migration_id, namespace, name FROM flows_migrations ORDER BY migration_id").all()
    db.close()
    expect(ledger).toEqual([
      { migration_id: 10001, namespace: "fixture", name: "first" },
      { migration_id: 10002, namespace: "fixture", name: "second" },
      { migration_id: 10003, namespace: "fixture", name: "third" }
    ])
  }, 120_000)
})
