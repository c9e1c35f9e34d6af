/**
 * `flows_runs` rows: the selected columns, decoding with re-validation (a row is input too),
 * and the comparisons the compare-and-swap operations decide with.
 */
import * as Consensus from "@baton/journal/Consensus"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"
import * as Boundary from "./Boundary.js"
import * as Errors from "./errors.js"
import {
  ClaimLoss,
  isRunStatus,
  type OwnerIdType,
  type RunRow,
  type RunSnapshot,
  type RunStoreError
} from "./model.js"

/** A decoded row without its state (what write paths lock and decide from). */
export type ControlRow = Omit<RunRow, "stateJson">

const controlColumns = `run_id, status, created_at_ms, started_at_ms, finished_at_ms,
  owner_host_id, owner_pid, owner_nonce, heartbeat_at_ms,
  claim_host_id, claim_pid, claim_nonce, claimed_at_ms,
  parent_run_id, cancel_requested_at_ms, lineage_id, round_ordinal`

/** Column list of a full row (trusted literal). */
export const fullColumns = (sql: SqlClient.SqlClient): Fragment => sql.literal(`${controlColumns}, state_json`)
/** Column list without `state_json` (trusted literal). */
export const controlColumnList = (sql: SqlClient.SqlClient): Fragment => sql.literal(controlColumns)

/** Integers arrive as numbers; a canonical decimal string (a client without BIGINT parser) is converted. */
const integerOrNull = Boundary.storedInteger

const textOrNull = (value: unknown): string | null | undefined => {
  if (value === null) return null
  return typeof value === "string" && !Boundary.isRefusal(Boundary.durableText("column", value)) ? value : undefined
}

const ownerOf = (host: string | null, pid: number | null, nonce: string | null): OwnerIdType | null =>
  host !== null && pid !== null && nonce !== null ? Object.freeze({ hostId: host, pid, nonce }) : null

/** Decodes one raw row; `withState` also decodes and re-admits `state_json`. */
export function decode(method: string, runId: string, raw: unknown, withState: true): RunRow | RunStoreError
export function decode(method: string, runId: string, raw: unknown, withState: false): ControlRow | RunStoreError
export function decode(method: string, runId: string, raw: unknown, withState: boolean): RunRow | ControlRow | RunStoreError {
  const schemaFailure = () => Errors.decodeFailed(method, "a stored run row does not decode", { runId, stage: "row-schema" })
  if (typeof raw !== "object" || raw === null) return schemaFailure()
  const r = raw as Record<string, unknown>
  const id = textOrNull(r.run_id)
  const ints = {
    createdAtMs: integerOrNull(r.created_at_ms),
    startedAtMs: integerOrNull(r.started_at_ms),
    finishedAtMs: integerOrNull(r.finished_at_ms),
    ownerPid: integerOrNull(r.owner_pid),
    heartbeatAtMs: integerOrNull(r.heartbeat_at_ms),
    claimPid: integerOrNull(r.claim_pid),
    claimedAtMs: integerOrNull(r.claimed_at_ms),
    cancelRequestedAtMs: integerOrNull(r.cancel_requested_at_ms),
    roundOrdinal: integerOrNull(r.round_ordinal)
  }
  const texts = {
    ownerHost: textOrNull(r.owner_host_id),
    ownerNonce: textOrNull(r.owner_nonce),
    claimHost: textOrNull(r.claim_host_id),
    claimNonce: textOrNull(r.claim_nonce),
    parentRunId: textOrNull(r.parent_run_id),
    lineageId: textOrNull(r.lineage_id)
  }
  if (
    typeof id !== "string" || !isRunStatus(r.status) || typeof ints.createdAtMs !== "number" ||
    Object.values(ints).some((v) => v === undefined) || Object.values(texts).some((v) => v === undefined) ||
    (withState && typeof r.state_json !== "string")
  ) {
    return schemaFailure()
  }
  const ownerParts = [texts.ownerHost, ints.ownerPid, texts.ownerNonce]
  const claimParts = [texts.claimHost, ints.claimPid, texts.claimNonce]
  const hasOwnerColumns = ownerParts.some((v) => v !== null)
  const hasClaimColumns = claimParts.some((v) => v !== null)
  const stateJsonValid = withState ? !Boundary.isRefusal(Boundary.jsonText("stateJson", r.state_json)) : true
  const owner = ownerOf(texts.ownerHost!, ints.ownerPid!, texts.ownerNonce!)
  const claim = ownerOf(texts.claimHost!, ints.claimPid!, texts.claimNonce!)
  const heartbeatAtMs = ints.heartbeatAtMs!
  const claimedAtMs = ints.claimedAtMs!
  const consistent = (hasOwnerColumns === (owner !== null)) &&
    (owner !== null) === (heartbeatAtMs !== null) &&
    (r.status === "running") === (owner !== null) &&
    (hasClaimColumns === (claim !== null)) &&
    (claim !== null) === (claimedAtMs !== null) &&
    stateJsonValid
  if (!consistent) {
    return Errors.decodeFailed(method, "a stored run row breaks the run invariants", {
      runId,
      status: r.status,
      heartbeatAtMs,
      claimedAtMs,
      hasClaimColumns,
      hasOwnerColumns,
      stateJsonValid
    })
  }
  const row = {
    runId: id,
    status: r.status,
    createdAtMs: ints.createdAtMs,
    startedAtMs: ints.startedAtMs!,
    finishedAtMs: ints.finishedAtMs!,
    owner,
    heartbeatAtMs,
    claim,
    claimedAtMs,
    parentRunId: texts.parentRunId!,
    cancelRequestedAtMs: ints.cancelRequestedAtMs!,
    lineageId: texts.lineageId!,
    roundOrdinal: ints.roundOrdinal!
  }
  return Object.freeze(withState ? { ...row, stateJson: r.state_json as string } : row)
}

const sameOwnerOrNull = (a: OwnerIdType | null, b: OwnerIdType | null): boolean =>
  a === null || b === null ? a === b : Consensus.sameOwner(a, b)

/** Status, owner triple and heartbeat all equal (NULL-equal). */
export const snapshotMatches = (row: ControlRow, expected: RunSnapshot): boolean =>
  row.status === expected.status && row.heartbeatAtMs === expected.heartbeatAtMs &&
  sameOwnerOrNull(row.owner, expected.owner)

/** The claim columns hold exactly this identity and token. */
export const claimMatches = (row: ControlRow, claimant: OwnerIdType, claimedAtMs: number): boolean =>
  row.claim !== null && Consensus.sameOwner(row.claim, claimant) && row.claimedAtMs === claimedAtMs

/** Running and owned by exactly this identity. */
export const ownedBy = (row: ControlRow, owner: OwnerIdType): boolean =>
  row.status === "running" && row.owner !== null && Consensus.sameOwner(row.owner, owner)

/** Strictly-stale cutoff: a stamp is stale iff `stamp < nowMs - 30_000`. */
export const staleAfterMs = 30_000
export const isStale = (stampMs: number | null, nowMs: number): boolean =>
  stampMs === null || stampMs < nowMs - staleAfterMs

/** Claim-loss classification: a lost race is named from the row, as a value. */
export const classify = (row: ControlRow | undefined, nowMs: number): ClaimLoss => {
  if (row === undefined) return ClaimLoss.NotFound()
  if (row.claim !== null) return ClaimLoss.AlreadyClaimed()
  if (row.status === "running" && !isStale(row.heartbeatAtMs, nowMs)) return ClaimLoss.HeartbeatFresh()
  return ClaimLoss.SnapshotChanged()
}

/** SQL predicate: the owner triple equals `owner`. */
export const ownerIs = (sql: SqlClient.SqlClient, owner: OwnerIdType): Fragment =>
  sql`owner_host_id = ${owner.hostId} AND owner_pid = ${owner.pid} AND owner_nonce = ${owner.nonce}`

/** SQL predicate: the claim columns equal `claimant` and its token. */
export const claimIs = (sql: SqlClient.SqlClient, claimant: OwnerIdType, claimedAtMs: number): Fragment =>
  sql`claim_host_id = ${claimant.hostId} AND claim_pid = ${claimant.pid} AND claim_nonce = ${claimant.nonce}
    AND claimed_at_ms = ${claimedAtMs}`

/** SQL predicate: the claim columns name `claimant` (any token). */
export const claimOwnerIs = (sql: SqlClient.SqlClient, claimant: OwnerIdType): Fragment =>
  sql`claim_host_id = ${claimant.hostId} AND claim_pid = ${claimant.pid} AND claim_nonce = ${claimant.nonce}`
