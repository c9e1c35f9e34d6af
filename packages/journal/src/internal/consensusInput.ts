/**
 * Argument validation shared by every Consensus strategy: a malformed argument
 * is `invalid_input` naming the field, before any rule or I/O.
 *
 * @internal
 */
import { Effect, Either, Schema } from "effect"
import { Identifier } from "../JournalEvent.js"
import { OwnerId } from "../OwnerId.js"
import { ConsensusError } from "./consensusError.js"
import { LivenessEvidence } from "./evidence.js"
import { firstIssue } from "./parse.js"

const Millis = Schema.Int.pipe(Schema.nonNegative())

const fields = {
  runId: Identifier,
  claimant: OwnerId,
  owner: OwnerId,
  staleClaimant: OwnerId,
  observer: OwnerId,
  nowMs: Millis,
  grantedAtMs: Millis,
  evidence: LivenessEvidence
} as const

type Args = { readonly [K in keyof typeof fields]?: unknown }

/** Validate the given arguments in declaration order; fail `invalid_input` naming the first bad one. */
export const validate = (args: Args): Effect.Effect<void, ConsensusError> =>
  Effect.suspend(() => {
    for (const name of Object.keys(args) as Array<keyof typeof fields>) {
      const schema = fields[name] as Schema.Schema<unknown, unknown>
      const result = Schema.decodeUnknownEither(schema)(args[name], { errors: "first" })
      if (Either.isLeft(result)) {
        const issue = firstIssue(result.left)
        const field = issue.path === "" ? name : `${name}.${issue.path}`
        return Effect.fail(new ConsensusError({ code: "invalid_input", field, message: `${field}: ${issue.message}` }))
      }
    }
    return Effect.void
  })
