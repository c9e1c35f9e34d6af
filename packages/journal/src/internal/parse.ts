/**
 * Parse-error helpers: the first issue of a schema failure as a dotted field path.
 *
 * @internal
 */
import { ParseResult } from "effect"

export const firstIssue = (error: ParseResult.ParseError): { readonly path: string; readonly message: string } => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const issue = issues[0]
  return issue === undefined
    ? { path: "", message: error.message }
    : { path: issue.path.map(String).join("."), message: issue.message }
}
