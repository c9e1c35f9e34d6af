/**
 * Pure planning and verification of a migration composition (docs/design/migrations.md,
 * steps 2–3 of the pass): no database access, so `run`, `status` and the read-only path share it.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** @internal */
export interface SetInput {
  readonly namespace: string
  readonly idOffset: number
  readonly migrations: Readonly<Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>>>
}

/** @internal */
export interface Declared {
  readonly id: number
  readonly namespace: string
  readonly name: string
  readonly effect: Effect.Effect<void, unknown, SqlClient.SqlClient>
}

interface PlannedSet {
  readonly namespace: string
  readonly idOffset: number
  /** Highest declared global id; `idOffset` when the set declares nothing. */
  readonly maxId: number
  readonly byId: ReadonlyMap<number, Declared>
}

/** @internal */
export interface Plan {
  readonly sets: ReadonlyMap<number, PlannedSet>
  /** Every declared migration, ascending global id. */
  readonly declared: ReadonlyArray<Declared>
}

const namespacePattern = /^[a-z][a-z0-9-]{0,39}$/
const keyPattern = /^([0-9]+)_([a-z0-9_]+)$/
const block = 1000

/**
 * Validate and snapshot `sets` (records are copied now, so later mutation of a set
 * does not change a pass in flight).
 *
 * @internal
 */
export const plan = (
  sets: ReadonlyArray<SetInput>
): { readonly _tag: "Planned"; readonly plan: Plan } | { readonly _tag: "Invalid"; readonly message: string } => {
  const invalid = (message: string) => ({ _tag: "Invalid" as const, message })
  const namespaces = new Set<string>()
  const offsets = new Map<number, string>()
  const planned = new Map<number, PlannedSet>()
  const declared: Array<Declared> = []
  for (const set of sets) {
    if (typeof set !== "object" || set === null) return invalid("a migration set must be an object")
    const namespace = set.namespace
    if (typeof namespace !== "string" || !namespacePattern.test(namespace)) {
      return invalid(`invalid migration namespace "${String(namespace)}"`)
    }
    if (namespaces.has(namespace)) return invalid(`duplicate migration namespace "${namespace}"`)
    namespaces.add(namespace)
    const offset = set.idOffset
    if (typeof offset !== "number" || !Number.isSafeInteger(offset) || offset < 0 || offset % block !== 0) {
      return invalid(`migration offset ${String(offset)} of ${namespace} must be a non-negative safe multiple of 1000`)
    }
    const owner = offsets.get(offset)
    if (owner !== undefined) return invalid(`migration offset ${offset} is used by both ${owner} and ${namespace}`)
    offsets.set(offset, namespace)
    const migrations: unknown = set.migrations
    if (typeof migrations !== "object" || migrations === null || Array.isArray(migrations)) {
      return invalid(`migrations of ${namespace} must be a record of "<digits>_<name>" keys to migration effects`)
    }
    const byId = new Map<number, Declared>()
    const keys = new Map<number, string>()
    for (const [key, effect] of Object.entries(set.migrations)) {
      const match = keyPattern.exec(key)
      if (match === null) return invalid(`migration key "${key}" of ${namespace} is not "<digits>_<name>"`)
      const local = Number(match[1])
      if (!(local >= 1 && local <= 999)) {
        return invalid(`migration key "${key}" of ${namespace} has local id ${match[1]}; local ids run from 1 to 999`)
      }
      const id = offset + local
      const previous = keys.get(id)
      if (previous !== undefined) {
        return invalid(`migration id ${id} is declared twice in ${namespace}: "${previous}" and "${key}"`)
      }
      keys.set(id, key)
      if (!Effect.isEffect(effect)) return invalid(`migration "${key}" of ${namespace} is not an Effect`)
      const migration: Declared = { id, namespace, name: match[2]!, effect }
      byId.set(id, migration)
      declared.push(migration)
    }
    const maxId = byId.size === 0 ? offset : Math.max(...byId.keys())
    planned.set(offset, { namespace, idOffset: offset, maxId, byId })
  }
  declared.sort((a, b) => a.id - b.id)
  return { _tag: "Planned", plan: { sets: planned, declared } }
}

/** @internal */
export interface Recorded {
  readonly id: number
  readonly namespace: string
  readonly name: string
}

/** @internal */
export type Verified =
  | {
    readonly _tag: "Refused"
    readonly reason: "ahead" | "history_mismatch"
    readonly message: string
    readonly migrationId: number
  }
  | {
    readonly _tag: "Verified"
    readonly applied: ReadonlyArray<Recorded>
    readonly pending: ReadonlyArray<Declared>
    readonly foreign: ReadonlyArray<Recorded>
    /** The first declared, unrecorded migration below its block's highest recorded id. */
    readonly hole: { readonly message: string; readonly migrationId: number } | undefined
  }

/** A declared migration, named from this build's code. */
const render = (m: Recorded): string => `${m.id} (${m.namespace}_${m.name})`

/**
 * A recorded migration, named by its id and the package whose block holds it: the ledger's stored
 * namespace and name are stored values (any text, newlines included) and never appear in a message.
 */
const recordedName = (id: number, namespace: string): string => `migration ${id} of ${namespace}`

/**
 * Steps 2–3 of the pass: classify recorded rows against the plan and find pending
 * migrations and holes. Rows are examined in ascending id; the first refusal wins.
 *
 * @internal
 */
export const verify = (plan: Plan, recorded: ReadonlyArray<Recorded>): Verified => {
  const applied: Array<Recorded> = []
  const foreign: Array<Recorded> = []
  const recordedIds = new Set<number>()
  const highestRecorded = new Map<number, number>()
  for (const row of [...recorded].sort((a, b) => a.id - b.id)) {
    const offset = Math.floor(row.id / block) * block
    const set = plan.sets.get(offset)
    if (set === undefined) {
      foreign.push(row)
      continue
    }
    recordedIds.add(row.id)
    highestRecorded.set(offset, Math.max(highestRecorded.get(offset) ?? 0, row.id))
    const declared = set.byId.get(row.id)
    if (declared !== undefined) {
      if (declared.namespace === row.namespace && declared.name === row.name) {
        applied.push(row)
        continue
      }
      return {
        _tag: "Refused",
        reason: "history_mismatch",
        message:
          `migration ${row.id} of ${set.namespace} is recorded under another name than this build declares (${declared.namespace}_${declared.name})`,
        migrationId: row.id
      }
    }
    if (row.id > set.maxId) {
      return {
        _tag: "Refused",
        reason: "ahead",
        message: `the database is ahead of this build: ${
          recordedName(row.id, set.namespace)
        } is recorded, but ${set.namespace} declares migrations only up to ${set.maxId}; upgrade ${set.namespace} or open another database`,
        migrationId: row.id
      }
    }
    return {
      _tag: "Refused",
      reason: "history_mismatch",
      message: `${recordedName(row.id, set.namespace)} is recorded but no longer declared by ${set.namespace}; migrations are append-only`,
      migrationId: row.id
    }
  }
  const pending = plan.declared.filter((migration) => !recordedIds.has(migration.id))
  let hole: { readonly message: string; readonly migrationId: number } | undefined
  for (const migration of pending) {
    const offset = Math.floor(migration.id / block) * block
    const highest = highestRecorded.get(offset)
    if (highest !== undefined && migration.id < highest) {
      hole = {
        message: `${
          render(migration)
        } is new but sits below already applied migration ${highest} of ${migration.namespace}; append new migrations after the last one`,
        migrationId: migration.id
      }
      break
    }
  }
  return { _tag: "Verified", applied, pending, foreign, hole }
}
