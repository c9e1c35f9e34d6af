/**
 * Shared test owners and helpers. `A`, `B` are on different hosts, `C` shares
 * `A`'s host; `S` is the staleness cutoff in ms.
 */
import { Consensus } from "@baton/journal/Consensus"
import type { OwnerId } from "@baton/journal/OwnerId"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

export const A: OwnerId = { hostId: "host-a", pid: 100, nonce: "nonce-a" }
export const B: OwnerId = { hostId: "host-b", pid: 200, nonce: "nonce-b" }
export const C: OwnerId = { hostId: "host-a", pid: 300, nonce: "nonce-c" }
export const S = 30_000

/** An event input on source `s` of type `x`, with `extra` fields merged in. */
export const ev = (runId: string, payload: unknown, extra: Record<string, unknown> = {}) => ({
  runId,
  sourceId: "s",
  eventType: "x",
  payload,
  ...extra
})

/** Claim and activate `runId` for `owner` at `nowMs`; fails the test when not granted. */
export const own = (runId: string, owner: OwnerId, nowMs = 0) =>
  Effect.gen(function*() {
    const consensus = yield* Consensus
    const claim = yield* consensus.claim(runId, owner, nowMs)
    if (claim._tag !== "Granted") return yield* Effect.die(new Error(`claim not granted: ${claim.reason}`))
    const activated = yield* consensus.activate(runId, owner, claim.grantedAtMs, nowMs)
    if (activated._tag !== "Activated") return yield* Effect.die(new Error("activation lost"))
  })

/** Every stored row of the events table for `runId`, in seq order. */
export const rows = (runId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{
      seq: number
      source_id: string
      source_seq: number
      event_type: string
      payload_json: string
      meta_json: string
    }>`SELECT seq, source_id, source_seq, event_type, payload_json, meta_json FROM flows_journal_events
      WHERE run_id = ${runId} ORDER BY seq`.pipe(
      Effect.map((list) => list.map((row) => ({ ...row, seq: Number(row.seq), source_seq: Number(row.source_seq) })))
    )
  })

/** Number of rows in a table. */
export const count = (table: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const result = yield* sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM ${sql(table)}`
    return Number(result[0]?.n ?? 0)
  })
