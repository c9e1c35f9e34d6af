/**
 * Dialect helpers, the durable write boundary and the migration ledger of Baton.
 * Node-only layers live at `@baton/database/SqliteDatabase`, `…/PgDatabase` and
 * `…/TestDatabase`.
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 */
export * as DatabaseOpenError from "./DatabaseOpenError.js"

/**
 * @since 0.1.0
 */
export * as Dialect from "./Dialect.js"

/**
 * @since 0.1.0
 */
export * as DurableWriter from "./DurableWriter.js"

/**
 * @since 0.1.0
 */
export * as Migrations from "./Migrations.js"
