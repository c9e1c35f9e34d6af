/**
 * Run-store admission: owners, evidence, snapshots, guards and create
 * options, read as inert records and returned as frozen copies.
 */
import type * as Consensus from "@baton/journal/Consensus"
import * as JournalEvent from "@baton/journal/JournalEvent"
import * as Boundary from "./Boundary.js"
import {
  type CreateOptions,
  isRunStatus,
  type OwnerIdType,
  type RunLease,
  type RunSnapshot,
  type RunStatus,
  type TransitionGuard
} from "./model.js"

type Admitted<A> = Boundary.Admitted<A>
const { isRefusal, ok, refuse } = Boundary

export const runId = (value: unknown, field = "runId"): Admitted<string> => Boundary.durableText(field, value)

/** `create`'s run id: durable text that is not a journal companion stream id. */
export const newRunId = (value: unknown): Admitted<string> => {
  const admitted = runId(value)
  if (isRefusal(admitted)) return admitted
  return JournalEvent.isCompanionRunId(admitted.value)
    ? refuse("runId", "runId uses the reserved journal companion stream prefix")
    : admitted
}

export const owner = (field: string, value: unknown): Admitted<OwnerIdType> => {
  const fields = Boundary.record(field, value, ["hostId", "pid", "nonce"], true)
  if (isRefusal(fields)) return fields
  const hostId = Boundary.durableText(`${field}.hostId`, fields.value.hostId)
  if (isRefusal(hostId)) return hostId
  const pid = Boundary.safeNonNegative(`${field}.pid`, fields.value.pid)
  if (isRefusal(pid)) return pid
  const nonce = Boundary.durableText(`${field}.nonce`, fields.value.nonce)
  if (isRefusal(nonce)) return nonce
  return ok(Object.freeze({ hostId: hostId.value, pid: pid.value, nonce: nonce.value }))
}

/**
 * Reads `value` as a dense array without invoking accessors: its own `length` must be a data
 * property holding an array length, and each element a data property (a Proxy or a getter is
 * refused, not run). Yields the elements, or the refusal naming `field`.
 */
const denseArray = (field: string, value: unknown): Admitted<ReadonlyArray<unknown>> => {
  try {
    if (!Array.isArray(value)) return refuse(field, `${field} must be an array`)
    const length = Reflect.getOwnPropertyDescriptor(value, "length")
    if (
      length === undefined || !("value" in length) || typeof length.value !== "number" ||
      !Number.isSafeInteger(length.value) || length.value < 0
    ) return refuse(field, `${field} must have a non-negative integer length`)
    const items: Array<unknown> = []
    for (let i = 0; i < length.value; i++) {
      const item = Reflect.getOwnPropertyDescriptor(value, i)
      if (item === undefined || !("value" in item)) return refuse(`${field}[${i}]`, `${field}[${i}] must be a data element`)
      items.push(item.value)
    }
    return ok(items)
  } catch {
    return refuse(field, `${field} could not be inspected`)
  }
}

/** `heartbeatMany`'s run ids: an array of durable texts (duplicates allowed); a frozen copy. */
export const runIds = (value: unknown): Admitted<ReadonlyArray<string>> => {
  const items = denseArray("runIds", value)
  if (isRefusal(items)) return items
  const ids: Array<string> = []
  for (const [i, item] of items.value.entries()) {
    const admitted = runId(item, `runIds[${i}]`)
    if (isRefusal(admitted)) return admitted
    ids.push(admitted.value)
  }
  return ok(Object.freeze(ids))
}

/** Leases this module built and froze itself: admitted once, accepted as they are afterwards. */
const trusted = new WeakSet<RunLease>()

/** One `{ runId, owner }` lease, named `field` in a refusal; a frozen copy. */
export const lease = (field: string, value: unknown): Admitted<RunLease> => {
  if (typeof value === "object" && value !== null && trusted.has(value as RunLease)) return ok(value as RunLease)
  const fields = Boundary.record(field, value, ["runId", "owner"], true)
  if (isRefusal(fields)) return fields
  const id = runId(fields.value.runId, `${field}.runId`)
  if (isRefusal(id)) return id
  const who = owner(`${field}.owner`, fields.value.owner)
  if (isRefusal(who)) return who
  return ok(Object.freeze({ runId: id.value, owner: who.value }))
}

/**
 * A lease admitted now and trusted from then on: a caller that sends the same leases again and
 * again (the host pulse, every second) pays for their admission once.
 */
export const trustedLease = (value: unknown): Admitted<RunLease> => {
  const admitted = lease("lease", value)
  if (!isRefusal(admitted)) trusted.add(admitted.value)
  return admitted
}

/** Frozen lists of distinct trusted leases, built by {@link trustedLeaseList}. */
const trustedLists = new WeakSet<ReadonlyArray<RunLease>>()

/**
 * Freezes `list` (leases from {@link trustedLease}, no lease twice) and trusts it as a whole, so
 * admitting it again costs one lookup instead of one per lease.
 */
export const trustedLeaseList = (list: Array<RunLease>): ReadonlyArray<RunLease> => {
  const seen = new Map<string, Array<OwnerIdType>>()
  for (const item of list) {
    if (!trusted.has(item)) return list
    const owners = seen.get(item.runId)
    if (owners === undefined) seen.set(item.runId, [item.owner])
    else if (owners.some((o) => o.hostId === item.owner.hostId && o.pid === item.owner.pid && o.nonce === item.owner.nonce)) return list
    else owners.push(item.owner)
  }
  const frozen = Object.freeze(list)
  trustedLists.add(frozen)
  return frozen
}

/** Whether `list` is a trusted list: admitted, and no lease in it twice. */
export const isDistinctLeaseList = (list: ReadonlyArray<RunLease>): boolean => trustedLists.has(list)

/** `heartbeatLeases`' leases: an array of `{ runId, owner }` records (duplicates allowed); a frozen copy. */
export const leases = (value: unknown): Admitted<ReadonlyArray<RunLease>> => {
  if (Array.isArray(value) && trustedLists.has(value)) return ok(value)
  const items = denseArray("leases", value)
  if (isRefusal(items)) return items
  const admitted: Array<RunLease> = []
  for (const [i, item] of items.value.entries()) {
    const one = lease(`leases[${i}]`, item)
    if (isRefusal(one)) return one
    admitted.push(one.value)
  }
  return ok(Object.freeze(admitted))
}

const evidenceKinds: ReadonlyArray<unknown> = ["same-host-pid-dead", "cross-host-unreachable-stale", "lease-expired"]

export const evidence = (field: string, value: unknown): Admitted<Consensus.LivenessEvidence> => {
  const fields = Boundary.record(field, value, ["expectedOwner", "checkedAtMs", "kind"], true)
  if (isRefusal(fields)) return fields
  const expectedOwner = owner(`${field}.expectedOwner`, fields.value.expectedOwner)
  if (isRefusal(expectedOwner)) return expectedOwner
  const checkedAtMs = Boundary.safeNonNegative(`${field}.checkedAtMs`, fields.value.checkedAtMs)
  if (isRefusal(checkedAtMs)) return checkedAtMs
  if (!evidenceKinds.includes(fields.value.kind)) {
    return refuse(`${field}.kind`, `${field}.kind must be one of ${evidenceKinds.join(", ")}`)
  }
  return ok(Object.freeze({
    expectedOwner: expectedOwner.value,
    checkedAtMs: checkedAtMs.value,
    kind: fields.value.kind as Consensus.LivenessEvidence["kind"]
  }))
}

/** A structural snapshot (extra fields ignored, so a `RunRow` is accepted), with its invariants. */
export const snapshot = (field: string, value: unknown): Admitted<RunSnapshot> => {
  const fields = Boundary.record(field, value, ["status", "owner", "heartbeatAtMs"], false)
  if (isRefusal(fields)) return fields
  const raw = fields.value
  for (const key of ["status", "owner", "heartbeatAtMs"]) {
    if (!(key in raw)) return refuse(`${field}.${key}`, `${field}.${key} is required`)
  }
  if (!isRunStatus(raw.status)) return refuse(`${field}.status`, `${field}.status must be a run status`)
  let heartbeatAtMs: number | null = null
  if (raw.heartbeatAtMs !== null) {
    const admitted = Boundary.safeNonNegative(`${field}.heartbeatAtMs`, raw.heartbeatAtMs)
    if (isRefusal(admitted)) return admitted
    heartbeatAtMs = admitted.value
  }
  let ownerValue: OwnerIdType | null = null
  if (raw.owner !== null) {
    const admitted = owner(`${field}.owner`, raw.owner)
    if (isRefusal(admitted)) return admitted
    ownerValue = admitted.value
  }
  const running = raw.status === "running"
  if (running !== (ownerValue !== null) || running !== (heartbeatAtMs !== null)) {
    return refuse(
      field,
      `${field} must have an owner and a heartbeat exactly when its status is running`
    )
  }
  return ok(Object.freeze({ status: raw.status, owner: ownerValue, heartbeatAtMs }))
}

/** `undefined` is no guard; `{}` a guard without predicate. */
export const guard = (value: unknown): Admitted<TransitionGuard | undefined> => {
  if (value === undefined) return ok(undefined)
  const fields = Boundary.record("guard", value, ["cancelRequested"], true)
  if (isRefusal(fields)) return fields
  const cancelRequested = fields.value.cancelRequested
  if (cancelRequested === undefined && !("cancelRequested" in fields.value)) return ok(Object.freeze({}))
  if (cancelRequested !== "absent" && cancelRequested !== "present") {
    return refuse("guard.cancelRequested", "guard.cancelRequested must be \"absent\" or \"present\"")
  }
  return ok(Object.freeze({ cancelRequested }))
}

export interface AdmittedCreateOptions {
  readonly parentRunId: string | null
  readonly lineageId: string | null
  readonly roundOrdinal: number | null
}

/** `create`'s options; `runId` is the admitted id of the run being created (a run cannot be its own parent). */
export const createOptions = (value: unknown, creatingRunId: string): Admitted<AdmittedCreateOptions> => {
  if (value === undefined || value === null) return ok({ parentRunId: null, lineageId: null, roundOrdinal: null })
  const fields = Boundary.record("options", value, ["parentRunId", "lineageId", "roundOrdinal"], true)
  if (isRefusal(fields)) return fields
  const present = (v: unknown) => v !== undefined && v !== null
  const raw = fields.value as Record<keyof CreateOptions, unknown>
  let parentRunId: string | null = null
  if (present(raw.parentRunId)) {
    const admitted = runId(raw.parentRunId, "options.parentRunId")
    if (isRefusal(admitted)) return admitted
    if (admitted.value === creatingRunId) {
      return refuse("options.parentRunId", "options.parentRunId must name another run, not the run being created")
    }
    parentRunId = admitted.value
  }
  let lineageId: string | null = null
  if (present(raw.lineageId)) {
    const admitted = runId(raw.lineageId, "options.lineageId")
    if (isRefusal(admitted)) return admitted
    lineageId = admitted.value
  }
  let roundOrdinal: number | null = null
  if (present(raw.roundOrdinal)) {
    const admitted = Boundary.safeNonNegative("options.roundOrdinal", raw.roundOrdinal)
    if (isRefusal(admitted)) return admitted
    roundOrdinal = admitted.value
  }
  if ((lineageId === null) !== (roundOrdinal === null)) {
    return refuse("options.lineageId", "options.lineageId and options.roundOrdinal must be given together")
  }
  return ok({ parentRunId, lineageId, roundOrdinal })
}

/** `transitionOwned`'s target: a run status other than `pending`. */
export const targetStatus = (value: unknown): Admitted<Exclude<RunStatus, "pending">> =>
  isRunStatus(value) && value !== "pending"
    ? ok(value)
    : refuse("toStatus", "toStatus must be running, suspended, completed, failed or cancelled")
