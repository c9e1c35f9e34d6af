import { completion, spawnFixture } from "../../database/test/support/processes.js"
import * as SqliteDatabase from "@baton/database/SqliteDatabase"
import * as Migrations from "@baton/journal/Migrations"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { lines } from "./support/lines.js"

const fixture = (name: string) => new URL(`./fixtures/${name}.ts`, import.meta.url)
const tempFile = () => path.join(mkdtempSync(path.join(tmpdir(), "baton-journal-")), "journal.db")
const withStdin = { stdio: ["pipe", "pipe", "pipe"] as ["pipe", "pipe", "pipe"] }

/** Create and migrate the file once so that the children race only on the work. */
const migrate = (filename: string) =>
  Effect.runPromise(
    Migrations.run.pipe(Effect.provide(SqliteDatabase.layer({ filename })), Effect.scoped)
  )

const query = <A>(filename: string, body: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, body).pipe(
      Effect.provide(SqliteDatabase.layer({ filename })),
      Effect.scoped
    ) as Effect.Effect<A>
  )

const timeout = 240_000

describe("several OS processes on one SQLite file", () => {
  it("check 16: three processes appending to one run get exactly seqs 0..149", async () => {
    const filename = tempFile()
    await migrate(filename)
    const children = [0, 1, 2].map((n) => spawnFixture(fixture("append"), [filename, "r", `source-${n}`, "50"], withStdin))
    const finished = children.map(completion)
    const outputs = children.map(lines)
    await Promise.all(outputs.map((output) => output.event("ready")))
    for (const child of children) child.stdin!.write("go\n")
    const done = await Promise.all(outputs.map((output) => output.event("done")))
    const results = await Promise.all(finished)
    expect(results.map((result) => result.code)).toEqual([0, 0, 0])
    const reported = done.flatMap((value) => value["seqs"] as Array<number>).sort((a, b) => a - b)
    expect(reported).toEqual(Array.from({ length: 150 }, (_, i) => i))
    const stored = await query(filename, (sql) =>
      sql<{ seq: number; source_id: string; source_seq: number }>`SELECT seq, source_id, source_seq
        FROM flows_journal_events WHERE run_id = 'r' ORDER BY seq`)
    expect(stored.map((row) => row.seq)).toEqual(Array.from({ length: 150 }, (_, i) => i))
    for (const source of ["source-0", "source-1", "source-2"]) {
      expect(stored.filter((row) => row.source_id === source).map((row) => row.source_seq)).toEqual(
        Array.from({ length: 50 }, (_, i) => i)
      )
    }
  }, timeout)

  it("check 30: two processes racing 200 claims: exactly one Granted per run, never an error", async () => {
    const filename = tempFile()
    await migrate(filename)
    const children = ["proc-1", "proc-2"].map((host) => spawnFixture(fixture("claims"), [filename, host, "200"], withStdin))
    const finished = children.map(completion)
    const outputs = children.map(lines)
    await Promise.all(outputs.map((output) => output.event("ready")))
    for (const child of children) child.stdin!.write("go\n")
    const [first, second] = (await Promise.all(outputs.map((output) => output.event("done")))).map(
      (value) => value["results"] as Array<string>
    )
    expect((await Promise.all(finished)).map((result) => result.code)).toEqual([0, 0])
    const leases = await query(filename, (sql) =>
      sql<{ run_id: string; claim_host_id: string }>`SELECT run_id, claim_host_id FROM flows_consensus_leases`)
    const winners = new Map(leases.map((row) => [row.run_id, row.claim_host_id]))
    let firstWins = 0
    for (let i = 0; i < 200; i++) {
      const pair = [first![i], second![i]].sort()
      expect(pair, `run-${i}`).toEqual(["Granted", "Rejected:already_claimed"])
      const winner = first![i] === "Granted" ? "proc-1" : "proc-2"
      if (winner === "proc-1") firstWins++
      expect(winners.get(`run-${i}`)).toBe(winner)
    }
    expect(leases.length).toBe(200)
    expect(firstWins).toBeGreaterThanOrEqual(0)
  }, timeout)

  it("check 31: no zombie append across processes: the owner's accepted entries precede the thief's marker", async () => {
    const filename = tempFile()
    await migrate(filename)
    const owner = spawnFixture(fixture("zombie"), [filename, "owner"])
    const ownerFinished = completion(owner)
    const ownerLines = lines(owner)
    await ownerLines.until((value) => value["event"] === "accepted" && (value["seq"] as number) >= 20)
    const thief = spawnFixture(fixture("zombie"), [filename, "thief"])
    const thiefFinished = completion(thief)
    const marker = (await lines(thief).event("marker"))["seq"] as number
    const done = await ownerLines.event("done")
    expect((await Promise.all([ownerFinished, thiefFinished])).map((result) => result.code)).toEqual([0, 0])
    const accepted = ownerLines.seen.filter((value) => value["event"] === "accepted").map((value) => value["seq"] as number)
    expect(accepted.length).toBeGreaterThanOrEqual(21)
    expect(Math.max(...accepted)).toBeLessThan(marker)
    expect((await ownerLines.event("fenced"))["code"]).toBe("fence_lost")
    expect(done["after"]).toEqual(["fence_lost", "fence_lost", "fence_lost"])
    const stored = await query(filename, (sql) =>
      sql<{ seq: number; source_id: string }>`SELECT seq, source_id FROM flows_journal_events WHERE run_id = 'r' ORDER BY seq`)
    expect(stored.map((row) => row.seq)).toEqual(Array.from({ length: stored.length }, (_, i) => i))
    expect(stored.filter((row) => row.source_id === "owner").length).toBe(accepted.length)
    expect(stored[stored.length - 1]).toEqual({ seq: marker, source_id: "thief" })
  }, timeout)
})
