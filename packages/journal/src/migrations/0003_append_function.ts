/**
 * PostgreSQL: `flows_journal_append(run_id, source_id, event_id_prefix,
 * emitted_at_ms, event_types[], payloads[], metas[])` appends entries to one
 * run's stream from inside another store's statement, so a run-store move and
 * its ownership facts are one round trip. It is VOLATILE, so each of its
 * queries reads a snapshot taken after the caller's row lock was granted (the
 * head and the source floor are never read from before the previous writer
 * committed). It answers `[first seq, first source_seq]`. A head outside the
 * seq range or an exhausted space raises `baton:sequence_conflict`; a stored
 * row at an allocated seq fails the statement (unique violation). SQLite needs
 * nothing: its writes append through the journal's own statements.
 *
 * @internal
 */
import * as Dialect from "@baton/database/Dialect"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  if (!Dialect.isPostgres(sql)) return
  yield* sql.unsafe(`CREATE OR REPLACE FUNCTION flows_journal_append(
    p_run_id text, p_source_id text, p_event_id_prefix text, p_emitted_at_ms bigint,
    p_event_types text[], p_payloads text[], p_metas text[]
  ) RETURNS bigint[] LANGUAGE plpgsql VOLATILE AS $fn$
  DECLARE
    n bigint := cardinality(p_event_types);
    first_seq bigint;
    first_source bigint;
  BEGIN
    INSERT INTO flows_journal_heads (run_id, next_seq) VALUES (p_run_id, n)
      ON CONFLICT (run_id) DO UPDATE SET next_seq = flows_journal_heads.next_seq + n
      RETURNING next_seq - n INTO first_seq;
    IF first_seq < 0 OR first_seq + n > 9007199254740990 THEN
      RAISE EXCEPTION 'baton:sequence_conflict';
    END IF;
    SELECT COALESCE(MAX(m), -1) + 1 INTO first_source FROM (
      SELECT MAX(source_seq) AS m FROM flows_journal_events WHERE run_id = p_run_id AND source_id = p_source_id
      UNION ALL
      SELECT MAX(source_seq) AS m FROM flows_journal_dedup WHERE run_id = p_run_id AND source_id = p_source_id
    ) floors;
    IF first_source + n > 9007199254740990 THEN
      RAISE EXCEPTION 'baton:sequence_conflict';
    END IF;
    INSERT INTO flows_journal_events
      (run_id, seq, event_id, source_id, source_seq, emitted_at_ms, event_type, payload_json, meta_json)
    SELECT p_run_id, first_seq + i - 1, p_event_id_prefix || (first_source + i - 1)::text, p_source_id,
      first_source + i - 1, p_emitted_at_ms, p_event_types[i], p_payloads[i], p_metas[i]
    FROM generate_subscripts(p_event_types, 1) AS i;
    RETURN ARRAY[first_seq, first_source];
  END
  $fn$`)
})
