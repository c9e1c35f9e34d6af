/**
 * Why a database layer refused to open. Refusals are typed failures
 * in the layer's error channel: hosts print `message`, tests match `reason`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * Open refusal reasons.
 *
 * @since 0.1.0
 * @category errors
 */
export const DatabaseOpenReason = Schema.Literal(
  "invalid_path",
  "wrong_dialect",
  "not_found",
  "not_a_file",
  "unreadable",
  "not_a_database",
  "corrupt",
  "foreign_database",
  "locked",
  "missing_url",
  "invalid_url",
  "invalid_schema",
  "connect_failed"
)

/**
 * @since 0.1.0
 * @category errors
 */
export type DatabaseOpenReason = typeof DatabaseOpenReason.Type

/**
 * A layer refused to open a database. `target` is the absolute path, or the URL with
 * its password replaced by `***`; `message` is a sentence for people.
 *
 * @since 0.1.0
 * @category errors
 */
export class DatabaseOpenError extends Schema.TaggedError<DatabaseOpenError>()("@baton/database/DatabaseOpenError", {
  reason: DatabaseOpenReason,
  target: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}
