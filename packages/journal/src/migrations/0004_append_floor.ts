/**
 * PostgreSQL: `flows_journal_append(run_id, source_id, event_id_prefix, emitted_at_ms, event_types[],
 * payloads[], metas[], source_floor)`, the append of `0003_append_function` with two differences: the first
 * source_seq is at least `source_floor` (the producer's floor held in process, above entries still queued
 * on the lossy channel), and a row already at an allocated seq raises `baton:seq_taken:<seq>` (instead of
 * a unique violation) so the caller can name the conflict. A fenced append calls it from a statement whose
 * first part locks the run's fence row, so guard and append are one round trip.
 * SQLite needs nothing.
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
    p_event_types text[], p_payloads text[], p_metas text[], p_source_floor bigint
  ) RETURNS bigint[] LANGUAGE plpgsql VOLATILE AS $fn$
  DECLARE
    n bigint := cardinality(p_event_types);
    first_seq bigint;
    first_source bigint;
    inserted bigint;
  BEGIN
    INSERT INTO flows_journal_heads (run_id, next_seq) VALUES (p_run_id, n)
      ON CONFLICT (run_id) DO UPDATE SET next_seq = flows_journal_heads.next_seq + n
      RETURNING next_seq - n INTO first_seq;
    IF first_seq < 0 OR first_seq + n > 9007199254740990 THEN
      RAISE EXCEPTION 'baton:sequence_conflict';
    END IF;
    SELECT GREATEST(COALESCE(MAX(m), -1) + 1, p_source_floor) INTO first_source FROM (
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
    FROM generate_subscripts(p_event_types, 1) AS i
    ON CONFLICT (run_id, seq) DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    IF inserted < n THEN
      RAISE EXCEPTION 'baton:seq_taken:%', first_seq;
    END IF;
    RETURN ARRAY[first_seq, first_source];
  END
  $fn$`)
})
