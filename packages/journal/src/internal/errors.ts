/**
 * JournalError constructors shared by the SQL journal's modules.
 *
 * @internal
 */
import { JournalError } from "../Journal.js"
import type { Seq } from "../JournalEvent.js"

export const invalid = (field: string, message: string): JournalError =>
  new JournalError({ code: "invalid_event", field, message: `${field}: ${message}` })

export const closed = (operation: string): JournalError =>
  new JournalError({ code: "journal_closed", message: `Journal.${operation}: the journal is closed` })

export const sinkFailed = (message: string, cause: unknown): JournalError =>
  new JournalError({ code: "sink_failed", message, cause })

export const readFailed = (operation: string, cause: unknown): JournalError =>
  new JournalError({ code: "read_failed", message: `Journal.${operation}: reading the journal failed`, cause })

export const decodeFailed = (message: string): JournalError =>
  new JournalError({ code: "decode_failed", message })

export const fenceLost = (runId: string, cause?: unknown): JournalError =>
  new JournalError({
    code: "fence_lost",
    message: `run ${JSON.stringify(runId)} is not owned by this owner (stolen, released, finished or never owned)`,
    ...(cause === undefined ? {} : { cause })
  })

export const conflict = (eventId: string): JournalError =>
  new JournalError({
    code: "idempotency_conflict",
    message: `identity ${eventId} was already emitted with different content`
  })

export const exhausted = (runId: string): JournalError =>
  new JournalError({
    code: "sequence_conflict",
    message: `run ${JSON.stringify(runId)} has exhausted its sequence space`
  })

/** The run's head allocated `seq`, but a stored row already holds it: the head disagrees with the rows. */
export const seqTaken = (runId: string, seq: number): JournalError =>
  new JournalError({
    code: "sequence_conflict",
    message: `run ${JSON.stringify(runId)} already has an entry at seq ${seq}, the seq its head allocated ` +
      "(the head disagrees with the stored rows); nothing was written"
  })

export const withFloor = (code: "compacted" | "reader_behind" | "checkpoint_invalid", message: string, floor: number) =>
  new JournalError({ code, message, checkpointSeq: floor as Seq })
