/**
 * The journal's tables: events (public contract for control), per-run heads,
 * checkpoints and the identities of compacted entries.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { idColumn, intColumn, jsonColumn } from "../internal/ddl.js"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE flows_journal_events (
    ${idColumn(sql, "run_id")},
    ${intColumn(sql, "seq")},
    ${idColumn(sql, "event_id")},
    ${idColumn(sql, "source_id")},
    ${intColumn(sql, "source_seq")},
    ${intColumn(sql, "emitted_at_ms")},
    ${idColumn(sql, "event_type")},
    ${jsonColumn(sql, "payload_json")},
    ${jsonColumn(sql, "meta_json")},
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, source_id, source_seq),
    UNIQUE (event_id)
  )`
  yield* sql`CREATE INDEX flows_journal_events_run_type_idx ON flows_journal_events (run_id, event_type, seq)`
  yield* sql`CREATE INDEX flows_journal_events_type_idx ON flows_journal_events (event_type)`
  yield* sql`CREATE TABLE flows_journal_heads (
    ${idColumn(sql, "run_id")} PRIMARY KEY,
    ${intColumn(sql, "next_seq")}
  )`
  yield* sql`CREATE TABLE flows_journal_checkpoints (
    ${idColumn(sql, "run_id")},
    ${intColumn(sql, "seq")},
    ${jsonColumn(sql, "state_json")},
    ${intColumn(sql, "created_at_ms")},
    ${intColumn(sql, "compacted_at_ms", true)},
    PRIMARY KEY (run_id, seq)
  )`
  yield* sql`CREATE TABLE flows_journal_dedup (
    ${idColumn(sql, "run_id")},
    ${idColumn(sql, "source_id")},
    ${intColumn(sql, "source_seq")},
    ${idColumn(sql, "event_id")},
    ${intColumn(sql, "seq")},
    content_hash TEXT NOT NULL CHECK (length(content_hash) = 64),
    PRIMARY KEY (run_id, source_id, source_seq),
    UNIQUE (event_id)
  )`
})
