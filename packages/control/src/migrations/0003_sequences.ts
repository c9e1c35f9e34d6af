/**
 * Control's numbers without a shared row (ledger id 2003). PostgreSQL: one sequence per number, each
 * continuing after the highest value the database holds for it (its `control_sequences` counter, the
 * rows numbered by it, and for plan ids the ids themselves), so no number is handed out twice.
 * `control_sequences` stays readable; the runtime no longer writes it on PostgreSQL. SQLite derives its
 * numbers from the rows with the counter as floor, so it needs nothing here.
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Sequences from "../internal/sqlSequences.js"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  if (!Dialect.isPostgres(sql)) return
  for (const [name, source] of Object.entries(Sequences.sources)) {
    const inRows = source.rows === undefined
      ? sql`SELECT MAX(CAST(substr(plan_id, 6) AS bigint)) FROM control_plans WHERE plan_id ~ '^plan-[0-9]{1,15}$'`
      : sql`SELECT MAX(${sql(source.rows.column)}) FROM ${sql(source.rows.table)}`
    const [row] = yield* sql<{ readonly last: number | string | null }>`SELECT GREATEST(
      (SELECT value FROM control_sequences WHERE name = ${name}), (${inRows}), 0) AS last`
    const last = Number(row?.last ?? 0)
    // START WITH takes no parameter; `last` is an integer read back from the database.
    if (!Number.isSafeInteger(last) || last < 0 || last >= 9007199254740991) {
      return yield* Effect.fail(new Error(`control sequence ${name} is exhausted`))
    }
    yield* sql.unsafe(`CREATE SEQUENCE ${source.sequence} AS bigint MINVALUE 1 MAXVALUE 9007199254740991
      START WITH ${last + 1} NO CYCLE`)
  }
})
