/**
 * What this package's layers know about a client they built: read-only or not and,
 * on PostgreSQL, the schema whose intention locks (docs/design/lock-order.md) its writes take.
 * Clients built elsewhere are unknown: read-write, no schema.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"

/** @internal */
export interface ClientInfo {
  readonly readOnly: boolean
  /** PostgreSQL schema of a `PgDatabase` client; the lock ids are derived from it. */
  readonly pgSchema?: string | undefined
  /**
   * Identity of the database behind the client. Clients sharing a connection (for
   * example `sql.withoutTransforms()`) are the same database; defaults to the client.
   */
  readonly database?: object | undefined
}

const registry = new WeakMap<object, ClientInfo>()

/** Record what a layer knows about `sql`. @internal */
export const mark = (sql: SqlClient.SqlClient, info: ClientInfo): void => {
  registry.set(sql, info)
  // `safe` is the same client; keep it recognizable too.
  if (sql.safe !== undefined && sql.safe !== sql) registry.set(sql.safe, info)
}

/** @internal */
export const get = (sql: SqlClient.SqlClient): ClientInfo | undefined => registry.get(sql)

/** @internal */
export const isReadOnly = (sql: SqlClient.SqlClient): boolean => registry.get(sql)?.readOnly === true

/** The identity used to tell two databases apart when writes nest. @internal */
export const databaseOf = (sql: SqlClient.SqlClient): object => registry.get(sql)?.database ?? sql
