/**
 * The Consensus strategy over the run row: `flows_runs` is the only record of
 * claim, owner, generation (`granted_at_ms`) and lease stamp. Give one build to
 * both `RunStore.layerWith` and `SqlJournal.layerWith()`: the journal's fenced
 * writes then check the same row the run store moves.
 *
 * The run store recognizes this strategy and asks it nothing: its own
 * statements carry the same predicates, so a claim, activation, heartbeat or
 * transition costs no statement of the strategy's. Called directly, each
 * mutation is one conditional `UPDATE` of the row inside `DurableWriter.write(…,
 * { key: runId, savepoint: false })`, and after a miss one `SELECT` names the
 * reason; `guard` is a read joining the ambient transaction (`FOR SHARE` on
 * PostgreSQL). A run is claimable only while its row is `pending` or
 * `suspended`; releasing an owner leaves the row `suspended` (claimable again).
 * A run id without a row is never granted (`Rejected unavailable`).
 *
 * @since 0.2.0
 */
import * as Dialect from "@baton/database/Dialect"
import { DurableWriter } from "@baton/database/DurableWriter"
import * as Consensus from "@baton/journal/Consensus"
import type { OwnerId } from "@baton/journal/OwnerId"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer } from "effect"
import * as RowStrategy from "./internal/rowStrategy.js"

interface LeaseRow {
  readonly status: string
  readonly claim_host_id: string | null
  readonly claim_pid: unknown
  readonly claim_nonce: string | null
  readonly claimed_at_ms: unknown
  readonly owner_host_id: string | null
  readonly owner_pid: unknown
  readonly owner_nonce: string | null
}

const granted = (grantedAtMs: number) => Consensus.Granted.make({ grantedAtMs })
const rejected = (reason: Consensus.RejectionReason) => Consensus.Rejected.make({ reason })
const lost = Consensus.Lost.make({})

/**
 * @since 0.2.0
 * @category constructors
 */
export const make: Effect.Effect<Consensus.Service, never, DurableWriter | SqlClient.SqlClient> = Effect.gen(
  function*() {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter
    const pg = Dialect.isPostgres(sql)

    const write = <A>(operation: string, runId: string, body: Effect.Effect<A, SqlError>) =>
      writer.write(body, { key: runId, savepoint: false }).pipe(
        Effect.mapError((error) => Consensus.persistenceFailed(operation, error))
      )

    const ownerIs = (o: OwnerId) => sql`owner_host_id = ${o.hostId} AND owner_pid = ${o.pid} AND owner_nonce = ${o.nonce}`
    const claimIs = (o: OwnerId) => sql`claim_host_id = ${o.hostId} AND claim_pid = ${o.pid} AND claim_nonce = ${o.nonce}`
    const clearClaim = sql`claim_host_id = NULL, claim_pid = NULL, claim_nonce = NULL, claimed_at_ms = NULL`
    const selectRow = (runId: string) =>
      sql<LeaseRow>`SELECT status, claim_host_id, claim_pid, claim_nonce, claimed_at_ms, owner_host_id, owner_pid,
          owner_nonce
        FROM flows_runs WHERE run_id = ${runId}`.pipe(Effect.map((rows) => rows[0]))
    const cutoff = (nowMs: number) => nowMs - Consensus.staleAfterMs
    const ownerMatches = (row: LeaseRow, o: OwnerId) =>
      row.owner_host_id === o.hostId && Number(row.owner_pid) === o.pid && row.owner_nonce === o.nonce
    const sameClaim = (row: LeaseRow, o: OwnerId, grantedAtMs: number) =>
      row.claim_host_id === o.hostId && Number(row.claim_pid) === o.pid && row.claim_nonce === o.nonce &&
      Number(row.claimed_at_ms) === grantedAtMs

    const claim: Consensus.Service["claim"] = (runId, claimant, nowMs) =>
      Consensus.validate({ runId, claimant, nowMs }).pipe(
        Effect.zipRight(write(
          "claim",
          runId,
          Effect.gen(function*() {
            const rows = yield* sql`UPDATE flows_runs SET claim_host_id = ${claimant.hostId},
                claim_pid = ${claimant.pid}, claim_nonce = ${claimant.nonce}, claimed_at_ms = ${nowMs}
              WHERE run_id = ${runId} AND status IN ('pending', 'suspended') AND claim_host_id IS NULL
              RETURNING run_id`
            if (rows.length > 0) return granted(nowMs)
            const row = yield* selectRow(runId)
            if (row === undefined) return rejected("unavailable")
            if (row.claim_host_id !== null) return rejected("already_claimed")
            return rejected(row.owner_host_id !== null ? "owner_held" : "unavailable")
          })
        ))
      )

    const activate: Consensus.Service["activate"] = (runId, owner, grantedAtMs, nowMs) =>
      Consensus.validate({ runId, owner, grantedAtMs, nowMs }).pipe(
        Effect.zipRight(write(
          "activate",
          runId,
          Effect.gen(function*() {
            const rows = yield* sql`UPDATE flows_runs SET status = 'running',
                started_at_ms = COALESCE(started_at_ms, ${nowMs}), finished_at_ms = NULL,
                owner_host_id = claim_host_id, owner_pid = claim_pid, owner_nonce = claim_nonce,
                granted_at_ms = claimed_at_ms, heartbeat_at_ms = ${nowMs}, ${clearClaim}
              WHERE run_id = ${runId} AND ${claimIs(owner)} AND claimed_at_ms = ${grantedAtMs}
              RETURNING run_id`
            return rows.length > 0 ? Consensus.Activated.make({}) : lost
          })
        ))
      )

    const renew = (operation: "heartbeat" | "reconfirm"): Consensus.Service["heartbeat"] => (runId, owner, nowMs) =>
      Consensus.validate({ runId, owner, nowMs }).pipe(
        Effect.zipRight(write(
          operation,
          runId,
          Effect.gen(function*() {
            const noClaim = operation === "reconfirm" ? sql`AND claim_host_id IS NULL` : sql``
            const rows = yield* sql<{ readonly heartbeat_at_ms: unknown }>`UPDATE flows_runs
              SET heartbeat_at_ms = ${Dialect.greatest(sql)}(heartbeat_at_ms, ${nowMs})
              WHERE run_id = ${runId} AND status = 'running' AND ${ownerIs(owner)} ${noClaim}
              RETURNING heartbeat_at_ms`
            const row = rows[0]
            return row === undefined ? lost : Consensus.Renewed.make({ heartbeatAtMs: Number(row.heartbeat_at_ms) })
          })
        ))
      )

    const release: Consensus.Service["release"] = (runId, owner) =>
      Consensus.validate({ runId, owner }).pipe(
        Effect.zipRight(write(
          "release",
          runId,
          Effect.gen(function*() {
            yield* sql`UPDATE flows_runs SET ${clearClaim} WHERE run_id = ${runId} AND ${claimIs(owner)}`
            yield* sql`UPDATE flows_runs SET status = 'suspended', owner_host_id = NULL, owner_pid = NULL,
                owner_nonce = NULL, granted_at_ms = NULL, heartbeat_at_ms = NULL
              WHERE run_id = ${runId} AND status = 'running' AND ${ownerIs(owner)}`
          })
        ))
      )

    const steal: Consensus.Service["steal"] = (runId, claimant, nowMs, evidence) =>
      Consensus.validate({ runId, claimant, nowMs, evidence }).pipe(
        Effect.zipRight(Effect.suspend(() => {
          if (!Consensus.stealEvidenceValid(claimant, nowMs, evidence)) {
            return Effect.succeed(rejected("evidence_invalid"))
          }
          return write(
            "steal",
            runId,
            Effect.gen(function*() {
              const rows = yield* sql`UPDATE flows_runs
                SET claim_host_id = ${claimant.hostId}, claim_pid = ${claimant.pid},
                  claim_nonce = ${claimant.nonce}, claimed_at_ms = ${nowMs}
                WHERE run_id = ${runId} AND status = 'running' AND ${ownerIs(evidence.expectedOwner)}
                  AND heartbeat_at_ms < ${cutoff(nowMs)} AND claim_host_id IS NULL
                RETURNING run_id`
              if (rows.length > 0) return granted(nowMs)
              const row = yield* selectRow(runId)
              if (row === undefined || !ownerMatches(row, evidence.expectedOwner)) return rejected("evidence_invalid")
              return rejected(row.claim_host_id !== null ? "already_claimed" : "owner_live")
            })
          )
        }))
      )

    const recover: Consensus.Service["recover"] = (runId, staleClaimant, grantedAtMs, observer, nowMs, evidence) =>
      Consensus.validate({ runId, staleClaimant, grantedAtMs, observer, nowMs, evidence }).pipe(
        Effect.zipRight(Effect.suspend(() => {
          if (!Consensus.matchesEvidence(staleClaimant, observer, nowMs, evidence)) {
            return Effect.succeed(rejected("evidence_invalid"))
          }
          return write(
            "recover",
            runId,
            Effect.gen(function*() {
              const rows = yield* sql`UPDATE flows_runs SET ${clearClaim}
                WHERE run_id = ${runId} AND ${claimIs(staleClaimant)} AND claimed_at_ms = ${grantedAtMs}
                  AND claimed_at_ms < ${cutoff(nowMs)}
                RETURNING run_id`
              if (rows.length > 0) return Consensus.Recovered.make({})
              const row = yield* selectRow(runId)
              return rejected(
                row !== undefined && sameClaim(row, staleClaimant, grantedAtMs) ? "claim_fresh" : "claim_changed"
              )
            })
          )
        }))
      )

    const fenceQuery = (runId: string, owner: OwnerId) =>
      pg
        ? sql`SELECT run_id FROM flows_runs WHERE run_id = ${runId} AND status = 'running' AND ${ownerIs(owner)}
          FOR SHARE`
        : sql`SELECT run_id FROM flows_runs WHERE run_id = ${runId} AND status = 'running' AND ${ownerIs(owner)}`

    const guard: Consensus.Service["guard"] = (runId, owner) =>
      Consensus.validate({ runId, owner }).pipe(
        Effect.zipRight(
          fenceQuery(runId, owner).pipe(Effect.mapError((error) => Consensus.persistenceFailed("guard", error)))
        ),
        Effect.flatMap((rows) => rows.length > 0 ? Effect.void : Effect.fail(Consensus.fenceLost(runId, owner)))
      )

    return RowStrategy.mark(Consensus.make({
      claim,
      activate,
      heartbeat: renew("heartbeat"),
      reconfirm: renew("reconfirm"),
      release,
      steal,
      recover,
      guard,
      fenceRow: { client: sql, query: fenceQuery }
    }), sql)
  }
)

/**
 * @since 0.2.0
 * @category layers
 */
export const layer: Layer.Layer<Consensus.Consensus, never, DurableWriter | SqlClient.SqlClient> = Layer.effect(
  Consensus.Consensus,
  make
)
