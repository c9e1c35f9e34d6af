/**
 * Column fragments shared by the journal's migrations.
 *
 * @internal
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"

/** `<column> <integer> [NOT NULL] CHECK (0 <= col <= MAX_SAFE_INTEGER AND is-integer)`. */
export const intColumn = (sql: SqlClient.SqlClient, name: string, nullable = false): Fragment => {
  const column = sql.literal(name)
  const range = sql`${column} BETWEEN 0 AND 9007199254740991 AND ${Dialect.isInteger(sql, column)}`
  return nullable
    ? sql`${column} ${Dialect.integer(sql)} NULL CHECK (${column} IS NULL OR (${range}))`
    : sql`${column} ${Dialect.integer(sql)} NOT NULL CHECK (${range})`
}

/** `<column> TEXT [NOT NULL] CHECK (length(col) > 0)`. */
export const idColumn = (sql: SqlClient.SqlClient, name: string, nullable = false): Fragment => {
  const column = sql.literal(name)
  return nullable
    ? sql`${column} TEXT NULL CHECK (${column} IS NULL OR length(${column}) > 0)`
    : sql`${column} TEXT NOT NULL CHECK (length(${column}) > 0)`
}

/** `<column> TEXT NOT NULL CHECK (json valid)`. */
export const jsonColumn = (sql: SqlClient.SqlClient, name: string): Fragment => {
  const column = sql.literal(name)
  return sql`${column} TEXT NOT NULL CHECK (${Dialect.jsonValid(sql, column)})`
}
