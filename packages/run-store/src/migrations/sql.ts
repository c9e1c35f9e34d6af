/**
 * DDL fragments the run-store migrations share.
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"

/** `isInteger(c) AND c >= 0 AND c <= 2^53 - 1`. */
export const safe = (sql: SqlClient.SqlClient, column: string): Fragment =>
  sql`${Dialect.isInteger(sql, sql.literal(column))} AND ${sql.literal(column)} >= 0 AND ${
    sql.literal(column)
  } <= 9007199254740991`

/** A nullable safe-integer column definition. */
export const nullableSafe = (sql: SqlClient.SqlClient, column: string): Fragment =>
  sql`${sql.literal(column)} ${Dialect.integer(sql)} CHECK (${sql.literal(column)} IS NULL OR (${safe(sql, column)}))`

/** A non-null safe-integer column definition. */
export const requiredSafe = (sql: SqlClient.SqlClient, column: string): Fragment =>
  sql`${sql.literal(column)} ${Dialect.integer(sql)} NOT NULL CHECK (${safe(sql, column)})`

/** A nullable JSON text column definition. */
export const nullableJson = (sql: SqlClient.SqlClient, column: string): Fragment =>
  sql`${sql.literal(column)} TEXT CHECK (${sql.literal(column)} IS NULL OR ${Dialect.jsonValid(sql, sql.literal(column))})`
