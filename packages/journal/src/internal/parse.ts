/**
 * Parse-error helpers: the first issue of a schema failure as a dotted field path.
 *
 * @internal
 */
import { Either, ParseResult } from "effect"
import type { JournalError } from "../Journal.js"
import { invalid } from "./errors.js"

export const firstIssue = (error: ParseResult.ParseError): { readonly path: string; readonly message: string } => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const issue = issues[0]
  return issue === undefined
    ? { path: "", message: error.message }
    : { path: issue.path.map(String).join("."), message: issue.message }
}

/** Decode `value`; on failure `invalid_event` with `field` = `<name>.<path of the first issue>`. */
export const decodeField = <A>(
  decode: (value: unknown, options?: { readonly errors: "first" }) => Either.Either<A, ParseResult.ParseError>,
  value: unknown,
  name: string
): Either.Either<A, JournalError> =>
  Either.mapLeft(decode(value, { errors: "first" }), (error) => {
    const issue = firstIssue(error)
    return invalid(issue.path === "" ? name : `${name}.${issue.path}`, issue.message)
  })
