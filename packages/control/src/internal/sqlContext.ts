/**
 * The SQL runtime's shared context: options snapshot, identity, clock, error mapping and optional-schema
 * probing.
 */
import * as Dialect from "@baton/database/Dialect"
import * as DurableWriter from "@baton/database/DurableWriter"
import type * as Ownership from "@baton/run-store/Ownership"
import type * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import { PersistenceError } from "../ControlError.js"
import type { Authority, DurableFlow, OwnerIdentity } from "../ControlRuntime.js"
import { isDurableTextOfLength } from "./canonical.js"

/** Options of `SqlControlRuntime`. */
export interface SqlOptions {
  readonly flows?: ReadonlyArray<DurableFlow> | undefined
  readonly loadFlows?: (() => Effect.Effect<ReadonlyArray<DurableFlow>, PersistenceError>) | undefined
  readonly currentFlows?: (() => Effect.Effect<ReadonlyArray<DurableFlow>, PersistenceError>) | undefined
  readonly pinnedFlow?: ((flowId: string, digest: string) => Effect.Effect<boolean | undefined, PersistenceError>) | undefined
  readonly adoptFlow?: ((flowId: string, runId: string) => Effect.Effect<DurableFlow | undefined, PersistenceError>) | undefined
  readonly owner?: OwnerIdentity | undefined
  readonly incarnation?: string | undefined
  readonly mintNonce?: (() => string) | undefined
  readonly isAlive?: Ownership.LivenessCheck | undefined
  readonly principal?: { readonly id: string; readonly kind: string } | undefined
  readonly approvalAuthority?: Authority | undefined
  readonly engineVersion?: string | undefined
  /**
   * The runtime's time source, epoch milliseconds; absent: Effect's `Clock`. When given, every
   * operation of the runtime (and the run store and journal writes it makes) reads this instead of
   * `Clock`; sleeping still uses the caller's clock.
   */
  readonly now?: (() => number) | undefined
}

type Foreign = SqlError | DurableWriter.DatabaseError | RunStore.RunStoreError

const foreignTags = new Set([
  "SqlError",
  "@baton/database/DatabaseError",
  "@baton/run-store/RunStoreError",
  "@baton/database/MigrationError",
  "ParseError"
])

const isForeign = (e: unknown): e is Foreign =>
  typeof e === "object" && e !== null && foreignTags.has((e as { readonly _tag?: string })._tag ?? "")

const describe = (e: unknown): string => {
  if (typeof e === "object" && e !== null) {
    const code = (e as { readonly code?: unknown }).code
    const message = (e as { readonly message?: unknown }).message
    return [typeof code === "string" ? code : undefined, typeof message === "string" ? message : undefined]
      .filter((x) => x !== undefined)
      .join(": ") || String(e)
  }
  return String(e)
}

/** Map storage failures (SQL, database, run store) to `PersistenceError(operation)`; domain errors pass. */
export const persist = (operation: string) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, Exclude<E, Foreign> | PersistenceError, R> =>
  Effect.catchAll(self, (e): Effect.Effect<never, Exclude<E, Foreign> | PersistenceError> =>
    isForeign(e)
      ? Effect.fail(new PersistenceError({ operation, message: describe(e), cause: e }))
      : Effect.fail(e as Exclude<E, Foreign>))

/** A `PersistenceError` naming the step. */
export const persistenceError = (operation: string, message: string) => new PersistenceError({ operation, message })

/** The fence of an owner: JSON with keys `hostId, pid, nonce` in that order. */
export const fenceOf = (owner: OwnerIdentity): string => JSON.stringify({ hostId: owner.hostId, pid: owner.pid, nonce: owner.nonce })

/** The owner a fence names, or `undefined` when it does not decode. */
export const ownerOf = (fence: string | undefined): OwnerIdentity | undefined => {
  if (fence === undefined) return undefined
  try {
    const value: unknown = JSON.parse(fence)
    if (typeof value !== "object" || value === null) return undefined
    const { hostId, pid, nonce } = value as Record<string, unknown>
    return typeof hostId === "string" && hostId.length > 0 && typeof nonce === "string" && nonce.length > 0 &&
        typeof pid === "number" && Number.isSafeInteger(pid) && pid >= 0
      ? { hostId, pid, nonce }
      : undefined
  } catch {
    return undefined
  }
}

/** Everything the SQL runtime modules share. */
export interface SqlContext {
  readonly sql: SqlClient.SqlClient
  readonly writer: DurableWriter.Service
  readonly store: RunStore.Service
  readonly options: SqlOptions
  readonly owner: OwnerIdentity
  readonly incarnation: string | undefined
  readonly isPostgres: boolean
  readonly now: Effect.Effect<number>
  /** A fresh claimant: this runtime's owner with a newly minted nonce. */
  readonly claimant: Effect.Effect<OwnerIdentity, PersistenceError>
  readonly sameProcess: (owner: OwnerIdentity) => boolean
  readonly write: <A, E, R>(key: string | undefined, operation: string, body: Effect.Effect<A, E, R>) => Effect.Effect<
    A,
    Exclude<E, Foreign> | PersistenceError,
    R
  >
  readonly optional: <A, E = never>(
    primary: Effect.Effect<A, E | SqlError>,
    fallback: Effect.Effect<A, E | SqlError>
  ) => Effect.Effect<A, E | SqlError>
  readonly catalog: Effect.Effect<ReadonlyArray<DurableFlow>, PersistenceError>
  readonly currentCatalog: Effect.Effect<ReadonlyArray<DurableFlow>, PersistenceError>
}

/** The synthetic identity of a runtime built without `owner`. */
const syntheticOwner = (): OwnerIdentity => ({
  hostId: `control-runtime-${globalThis.crypto.randomUUID()}`,
  pid: 1,
  nonce: globalThis.crypto.randomUUID()
})

/** True when a failure is the "missing table/column" kind an optional read folds into "no evidence". */
export const isSchemaMiss = (e: unknown): boolean => DurableWriter.codeOf(e) === "schema"

/** Build the context, validating the options (`PersistenceError` "configure the runtime"). */
export const makeContext = (
  options: SqlOptions,
  store: RunStore.Service
): Effect.Effect<SqlContext, PersistenceError, SqlClient.SqlClient | DurableWriter.DurableWriter> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* DurableWriter.DurableWriter
    const snapshot: SqlOptions = Object.freeze({ ...options })
    const owner = Object.freeze({ ...(options.owner ?? syntheticOwner()) })
    const incarnation = options.incarnation
    if (incarnation !== undefined && !isDurableTextOfLength(incarnation, 256)) {
      return yield* Effect.fail(persistenceError("configure the runtime", "incarnation: must be 1 to 256 well-formed characters"))
    }
    const mint = options.mintNonce ??
      (() => incarnation === undefined ? globalThis.crypto.randomUUID() : `${incarnation}.${globalThis.crypto.randomUUID()}`)
    let lastNonce: string | undefined
    const claimant = Effect.suspend(() => {
      let nonce: unknown
      try {
        nonce = mint()
      } catch (cause) {
        return Effect.fail(new PersistenceError({ operation: "mint a claim nonce", message: "mintNonce threw", cause }))
      }
      if (!isDurableTextOfLength(nonce, 1024)) {
        return Effect.fail(persistenceError("mint a claim nonce", "nonce: must be 1 to 1024 well-formed characters"))
      }
      if (incarnation !== undefined && !nonce.startsWith(`${incarnation}.`)) {
        return Effect.fail(persistenceError("mint a claim nonce", `nonce: must start with "${incarnation}."`))
      }
      if (nonce === lastNonce) return Effect.fail(persistenceError("mint a claim nonce", "nonce: must differ from the last one"))
      lastNonce = nonce
      return Effect.succeed({ hostId: owner.hostId, pid: owner.pid, nonce })
    })
    const sameProcess = (other: OwnerIdentity) =>
      other.hostId === owner.hostId && other.pid === owner.pid &&
      (incarnation === undefined || other.nonce.startsWith(`${incarnation}.`))
    const write = <A, E, R>(key: string | undefined, operation: string, body: Effect.Effect<A, E, R>) =>
      writer.write(body, key === undefined ? {} : { key }).pipe(persist(operation))
    const optional = <A, E = never>(primary: Effect.Effect<A, E | SqlError>, fallback: Effect.Effect<A, E | SqlError>) =>
      Effect.flatMap(DurableWriter.isInTransaction, (inTx) =>
        // A failed statement aborts a PostgreSQL transaction: probe under a savepoint there.
        (inTx ? sql.withTransaction(primary) : primary).pipe(
          Effect.catchIf(isSchemaMiss, () => fallback)
        ))
    const catalog = Effect.suspend(() =>
      snapshot.loadFlows !== undefined ? snapshot.loadFlows() : Effect.succeed(snapshot.flows ?? [])
    )
    const currentCatalog = Effect.suspend(() =>
      snapshot.currentFlows !== undefined ? snapshot.currentFlows() : catalog
    )
    return {
      sql,
      writer,
      store,
      options: snapshot,
      owner,
      incarnation,
      isPostgres: Dialect.isPostgres(sql),
      now: Clock.currentTimeMillis,
      claimant,
      sameProcess,
      write,
      optional,
      catalog,
      currentCatalog
    }
  })
