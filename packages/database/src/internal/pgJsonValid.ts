/**
 * The PostgreSQL JSON-validity helper `baton_json_valid(text) → boolean`
 * behind `Dialect.jsonValid`. One definition, installed by the
 * `PgDatabase` read-write open and ensured by the ledger pass.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"

/** The helper's name; `Dialect.jsonValid` renders calls to it. */
export const functionName = "baton_json_valid"

const schemaName = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * DDL of the helper in `schema`. It casts to `jsonb` (not `json`) so every
 * text a CHECK admits can later be read through `jsonb` (no `\u0000`, no
 * unpaired surrogate escapes); any data exception (class 22) answers false,
 * other errors propagate; STRICT answers NULL for NULL. PARALLEL UNSAFE, not
 * SAFE: the exception block starts a subtransaction, which PostgreSQL refuses
 * inside a parallel scan ("cannot start subtransactions during a parallel
 * operation"), so a large listing that filtered on it would fail.
 */
export const definition = (schema: string): string => {
  if (!schemaName.test(schema)) throw new Error(`baton_json_valid: invalid schema name ${JSON.stringify(schema)}`)
  return `CREATE OR REPLACE FUNCTION "${schema}".${functionName}(value text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE AS $baton$
BEGIN
  PERFORM value::jsonb;
  RETURN true;
EXCEPTION WHEN data_exception THEN
  RETURN false;
END;
$baton$`
}

/**
 * Create the helper in `schema` (default: the session's `current_schema()`)
 * unless it already exists. Callers hold the schema lock exclusively, so two
 * installers never race on the catalog.
 */
export const ensure = (sql: SqlClient.SqlClient, schema?: string): Effect.Effect<void, SqlError> =>
  Effect.gen(function*() {
    const target = schema ?? (yield* sql<{ readonly name: string | null }>`SELECT current_schema() AS name`)[0]?.name
    // A schema this package could not have created (quoted, mixed case) is left alone.
    if (target === undefined || target === null || !schemaName.test(target)) return
    // An earlier definition declared PARALLEL SAFE is replaced.
    const present = yield* sql<{ readonly present: number }>`
      SELECT 1 AS present FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = ${target} AND p.proname = ${functionName} AND p.proparallel = 'u'`
    if (present.length > 0) return
    yield* sql.unsafe(definition(target))
  })
