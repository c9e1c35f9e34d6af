/**
 * Parse-error helpers: the first issue of a schema failure as a dotted field path.
 *
 * @internal
 */
import { Either, ParseResult } from "effect"
import type { JournalError } from "../Journal.js"
import { invalid } from "./errors.js"

/**
 * Effect's built-in messages end in `, actual <the value>`: cut that part, so a
 * refusal names the rule and never quotes the caller's value (which may hold a secret).
 */
const withoutActual = (message: string): string => {
  const at = message.indexOf(", actual ")
  return at < 0 ? message : message.slice(0, at)
}

export const firstIssue = (error: ParseResult.ParseError): { readonly path: string; readonly message: string } => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const issue = issues[0]
  return issue === undefined
    ? { path: "", message: "is invalid" }
    : { path: issue.path.map(String).join("."), message: withoutActual(issue.message) }
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
