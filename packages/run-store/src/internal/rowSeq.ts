/**
 * How `create` numbers a run (`row_seq`) without a shared row.
 *
 * PostgreSQL: the `flows_run_row_seq` sequence; `nextval` never waits, and a number whose create
 * rolls back is not reused. Numbers are not taken in commit order, so readers that hand out a
 * position wait for creates in flight. SQLite: writes are serialized by the write lock, so one
 * above the highest number ever recorded is commit-ordered; change rows keep deleted runs' numbers
 * and the frozen `flows_run_counter` is the floor from before the sequence.
 */
import * as Dialect from "@baton/database/Dialect"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"

/** The SQL expression of the next number, for an `INSERT INTO flows_runs` value. */
export const nextRowSeqText = (postgres: boolean): string =>
  postgres
    ? `nextval('flows_run_row_seq')`
    : `(SELECT MAX(m) + 1 FROM (SELECT MAX(row_seq) AS m FROM flows_run_changes
        UNION ALL SELECT last_row_seq FROM flows_run_counter UNION ALL SELECT 0))`

/** {@link nextRowSeqText} as a fragment of `sql`'s dialect. */
export const nextRowSeq = (sql: SqlClient.SqlClient): Fragment => sql.literal(nextRowSeqText(Dialect.isPostgres(sql)))
