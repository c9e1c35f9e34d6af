/**
 * The journal-only Consensus strategy over `flows_consensus_leases` (hosts that
 * run the run store use its row-backed `SqlConsensus` instead). It holds no process
 * state, so any number of instances over one database agree. Each mutation is
 * one conditional statement inside `DurableWriter.write(…, { key: runId,
 * savepoint: false })` (joined to the caller's write without a savepoint, or
 * its own keyed transaction); after a miss one `SELECT` names the reason. `guard` is a read joining the ambient
 * transaction (`FOR SHARE` on PostgreSQL).
 *
 * @since 0.1.0
 */
import * as Dialect from "@baton/database/Dialect"
import { DurableWriter } from "@baton/database/DurableWriter"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer } from "effect"
import * as Consensus from "./Consensus.js"
import { fenceLost, persistenceFailed } from "./internal/consensusError.js"
import { validate } from "./internal/consensusInput.js"
import * as Rules from "./internal/leaseRules.js"
import type { OwnerId } from "./OwnerId.js"

interface LeaseRow {
  readonly claim_host_id: string | null
  readonly claim_pid: unknown
  readonly claim_nonce: string | null
  readonly claimed_at_ms: unknown
  readonly owner_host_id: string | null
  readonly owner_pid: unknown
  readonly owner_nonce: string | null
  readonly heartbeat_at_ms: unknown
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Consensus.Service, never, DurableWriter | SqlClient.SqlClient> = Effect.gen(
  function*() {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter
    const pg = Dialect.isPostgres(sql)

    const write = <A>(operation: string, runId: string, body: Effect.Effect<A, SqlError>) =>
      // One conditional statement: inside a caller's write it joins without a savepoint.
      writer.write(body, { key: runId, savepoint: false }).pipe(
        Effect.mapError((error) => persistenceFailed(operation, error))
      )
    const read = <A>(operation: string, body: Effect.Effect<A, SqlError>) =>
      body.pipe(Effect.mapError((error) => persistenceFailed(operation, error)))

    const ownerIs = (o: OwnerId) => sql`owner_host_id = ${o.hostId} AND owner_pid = ${o.pid} AND owner_nonce = ${o.nonce}`
    const claimIs = (o: OwnerId) => sql`claim_host_id = ${o.hostId} AND claim_pid = ${o.pid} AND claim_nonce = ${o.nonce}`
    const selectRow = (runId: string) =>
      sql<LeaseRow>`SELECT claim_host_id, claim_pid, claim_nonce, claimed_at_ms, owner_host_id, owner_pid,
          owner_nonce, heartbeat_at_ms
        FROM flows_consensus_leases WHERE run_id = ${runId}`.pipe(Effect.map((rows) => rows[0]))
    const deleteIfEmpty = (runId: string) =>
      sql`DELETE FROM flows_consensus_leases
        WHERE run_id = ${runId} AND owner_host_id IS NULL AND claim_host_id IS NULL`
    const cutoff = (nowMs: number) => nowMs - Rules.staleAfterMs
    const sameClaim = (row: LeaseRow, o: OwnerId, grantedAtMs: number) =>
      row.claim_host_id === o.hostId && Number(row.claim_pid) === o.pid && row.claim_nonce === o.nonce &&
      Number(row.claimed_at_ms) === grantedAtMs
    const ownerMatches = (row: LeaseRow, o: OwnerId) =>
      row.owner_host_id === o.hostId && Number(row.owner_pid) === o.pid && row.owner_nonce === o.nonce

    const claim: Consensus.Service["claim"] = (runId, claimant, nowMs) =>
      validate({ runId, claimant, nowMs }).pipe(
        Effect.zipRight(write(
          "claim",
          runId,
          Effect.gen(function*() {
            const rows = yield* sql`INSERT INTO flows_consensus_leases
                (run_id, claim_host_id, claim_pid, claim_nonce, claimed_at_ms)
              VALUES (${runId}, ${claimant.hostId}, ${claimant.pid}, ${claimant.nonce}, ${nowMs})
              ON CONFLICT (run_id) DO UPDATE SET claim_host_id = excluded.claim_host_id,
                claim_pid = excluded.claim_pid, claim_nonce = excluded.claim_nonce,
                claimed_at_ms = excluded.claimed_at_ms
              WHERE flows_consensus_leases.claim_host_id IS NULL AND flows_consensus_leases.owner_host_id IS NULL
              RETURNING run_id`
            if (rows.length > 0) return Rules.granted(nowMs)
            const row = yield* selectRow(runId)
            return Rules.rejected(row?.claim_host_id != null ? "already_claimed" : "owner_held")
          })
        ))
      )

    const activate: Consensus.Service["activate"] = (runId, owner, grantedAtMs, nowMs) =>
      validate({ runId, owner, grantedAtMs, nowMs }).pipe(
        Effect.zipRight(write(
          "activate",
          runId,
          Effect.gen(function*() {
            const rows = yield* sql`UPDATE flows_consensus_leases SET
                owner_host_id = claim_host_id, owner_pid = claim_pid, owner_nonce = claim_nonce,
                granted_at_ms = claimed_at_ms, heartbeat_at_ms = ${nowMs},
                claim_host_id = NULL, claim_pid = NULL, claim_nonce = NULL, claimed_at_ms = NULL
              WHERE run_id = ${runId} AND ${claimIs(owner)} AND claimed_at_ms = ${grantedAtMs}
              RETURNING run_id`
            return rows.length > 0 ? Consensus.Activated.make({}) : Rules.lost
          })
        ))
      )

    const renew = (operation: "heartbeat" | "reconfirm"): Consensus.Service["heartbeat"] => (runId, owner, nowMs) =>
      validate({ runId, owner, nowMs }).pipe(
        Effect.zipRight(write(
          operation,
          runId,
          Effect.gen(function*() {
            const noClaim = operation === "reconfirm" ? sql`AND claim_host_id IS NULL` : sql``
            const rows = yield* sql<{ readonly heartbeat_at_ms: unknown }>`UPDATE flows_consensus_leases
              SET heartbeat_at_ms = ${Dialect.greatest(sql)}(heartbeat_at_ms, ${nowMs})
              WHERE run_id = ${runId} AND ${ownerIs(owner)} ${noClaim}
              RETURNING heartbeat_at_ms`
            const row = rows[0]
            return row === undefined
              ? Rules.lost
              : Consensus.Renewed.make({ heartbeatAtMs: Number(row.heartbeat_at_ms) })
          })
        ))
      )

    const release: Consensus.Service["release"] = (runId, owner) =>
      validate({ runId, owner }).pipe(
        Effect.zipRight(write(
          "release",
          runId,
          Effect.gen(function*() {
            yield* sql`UPDATE flows_consensus_leases
              SET claim_host_id = NULL, claim_pid = NULL, claim_nonce = NULL, claimed_at_ms = NULL
              WHERE run_id = ${runId} AND ${claimIs(owner)}`
            yield* sql`UPDATE flows_consensus_leases
              SET owner_host_id = NULL, owner_pid = NULL, owner_nonce = NULL, granted_at_ms = NULL,
                heartbeat_at_ms = NULL
              WHERE run_id = ${runId} AND ${ownerIs(owner)}`
            yield* deleteIfEmpty(runId)
          })
        ))
      )

    const steal: Consensus.Service["steal"] = (runId, claimant, nowMs, evidence) =>
      validate({ runId, claimant, nowMs, evidence }).pipe(
        Effect.zipRight(Effect.suspend(() => {
          if (!Rules.stealEvidenceValid(claimant, nowMs, evidence)) {
            return Effect.succeed(Rules.rejected("evidence_invalid"))
          }
          return write(
            "steal",
            runId,
            Effect.gen(function*() {
              const rows = yield* sql`UPDATE flows_consensus_leases
                SET claim_host_id = ${claimant.hostId}, claim_pid = ${claimant.pid},
                  claim_nonce = ${claimant.nonce}, claimed_at_ms = ${nowMs}
                WHERE run_id = ${runId} AND ${ownerIs(evidence.expectedOwner)}
                  AND heartbeat_at_ms < ${cutoff(nowMs)} AND claim_host_id IS NULL
                RETURNING run_id`
              if (rows.length > 0) return Rules.granted(nowMs)
              const row = yield* selectRow(runId)
              if (row === undefined || !ownerMatches(row, evidence.expectedOwner)) {
                return Rules.rejected("evidence_invalid")
              }
              return Rules.rejected(row.claim_host_id !== null ? "already_claimed" : "owner_live")
            })
          )
        }))
      )

    const recover: Consensus.Service["recover"] = (runId, staleClaimant, grantedAtMs, observer, nowMs, evidence) =>
      validate({ runId, staleClaimant, grantedAtMs, observer, nowMs, evidence }).pipe(
        Effect.zipRight(Effect.suspend(() => {
          if (!Rules.matchesEvidence(staleClaimant, observer, nowMs, evidence)) {
            return Effect.succeed(Rules.rejected("evidence_invalid"))
          }
          return write(
            "recover",
            runId,
            Effect.gen(function*() {
              const rows = yield* sql`UPDATE flows_consensus_leases
                SET claim_host_id = NULL, claim_pid = NULL, claim_nonce = NULL, claimed_at_ms = NULL
                WHERE run_id = ${runId} AND ${claimIs(staleClaimant)} AND claimed_at_ms = ${grantedAtMs}
                  AND claimed_at_ms < ${cutoff(nowMs)}
                RETURNING run_id`
              if (rows.length > 0) {
                yield* deleteIfEmpty(runId)
                return Consensus.Recovered.make({})
              }
              const row = yield* selectRow(runId)
              return Rules.rejected(
                row !== undefined && sameClaim(row, staleClaimant, grantedAtMs) ? "claim_fresh" : "claim_changed"
              )
            })
          )
        }))
      )

    const guard: Consensus.Service["guard"] = (runId, owner) =>
      validate({ runId, owner }).pipe(
        Effect.zipRight(read(
          "guard",
          pg
            ? sql`SELECT run_id FROM flows_consensus_leases WHERE run_id = ${runId} AND ${ownerIs(owner)} FOR SHARE`
            : sql`SELECT run_id FROM flows_consensus_leases WHERE run_id = ${runId} AND ${ownerIs(owner)}`
        )),
        Effect.flatMap((rows) => rows.length > 0 ? Effect.void : Effect.fail(fenceLost(runId, owner)))
      )

    return Consensus.make({
      claim,
      activate,
      heartbeat: renew("heartbeat"),
      reconfirm: renew("reconfirm"),
      release,
      steal,
      recover,
      guard
    })
  }
)

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Consensus.Consensus, never, DurableWriter | SqlClient.SqlClient> = Layer.effect(
  Consensus.Consensus,
  make
)
