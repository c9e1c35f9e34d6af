/**
 * Recognizes the run store's own SQL strategy. When the store's strategy is
 * that strategy over the same client, the row is the lease record and the
 * store's statements already carry every lease predicate, so the store asks the
 * strategy nothing (no statement of its own); any other strategy (`layerLocal`,
 * one over another database) is asked and mirrored as before.
 */
import type * as Consensus from "@baton/journal/Consensus"
import type * as SqlClient from "@effect/sql/SqlClient"

const clients = new WeakMap<Consensus.Service, SqlClient.SqlClient>()

/** Records that `service` keeps its leases on the run rows behind `sql`. */
export const mark = (service: Consensus.Service, sql: SqlClient.SqlClient): Consensus.Service => {
  clients.set(service, sql)
  return service
}

/** Whether `service` is the row strategy over exactly `sql`. */
export const isRowStrategyOn = (service: Consensus.Service, sql: SqlClient.SqlClient): boolean =>
  clients.get(service) === sql
