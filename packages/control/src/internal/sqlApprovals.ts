/**
 * Approval tokens and grants over `control_tokens` and `control_grants`.
 */
import { Effect, Either, Schema } from "effect"
import { AlreadyResolved, PersistenceError, PlanNotFound, RunNotFound } from "../ControlError.js"
import type { Envelope, GrantScope, NodeTarget, Principal } from "../ControlSchema.js"
import { ApprovalTarget, Envelope as EnvelopeSchema, GrantScope as GrantScopeSchema, Principal as PrincipalSchema } from "../ControlSchema.js"
import type { ApprovalToken, Authority, BulkGrant } from "../ControlRuntime.js"
import { ApprovalDecision } from "../ControlRuntime.js"
import { canonical } from "./canonical.js"
import { checkReason, checkTarget, identityOf } from "./runtimeChecks.js"
import type { SqlContext } from "./sqlContext.js"
import { persist } from "./sqlContext.js"
import { runExists } from "./sqlRows.js"
import { corrupt, decoder } from "./storedValue.js"

interface TokenRow {
  readonly target_tag: string
  readonly run_id: string
  readonly target_id: string
  readonly token_id: string
  readonly target_json: string
  readonly resolved: number | boolean | string
  readonly decision_principal_json: string | null
  readonly decision_json: string | null
}

const decodeTarget = decoder(ApprovalTarget, "control_tokens.target_json", { json: true })
const decodeDecision = decoder(ApprovalDecision, "control_tokens.decision_json", { json: true })
const decodePrincipal = decoder(PrincipalSchema, "control_tokens.decision_principal_json", { json: true })
const decodeEnvelope = decoder(EnvelopeSchema, "control_grants.envelope_json", { json: true })
const decodeScope = decoder(GrantScopeSchema, "control_grants.scope")

const corruptToken = (row: TokenRow, rule: string) => corrupt("control_tokens", `token ${row.token_id}`, rule)

/** Decode a token row, enforcing the identity and resolution invariants. */
const tokenOf = (row: TokenRow): Effect.Effect<ApprovalToken, PersistenceError> => {
  const subject = `token ${row.token_id}`
  const target = decodeTarget(row.target_json, subject)
  if (Either.isLeft(target)) return Effect.fail(target.left)
  const id = identityOf(target.right)
  if (id.tag !== row.target_tag || id.runId !== row.run_id || id.targetId !== row.target_id || row.token_id !== row.target_id) {
    return Effect.fail(corruptToken(row, "stored approval target disagrees with its key"))
  }
  const resolved = Number(row.resolved) === 1 || row.resolved === true
  if (row.decision_json === null) {
    if (resolved) {
      return Effect.fail(
        corruptToken(row, "is resolved but its decision was erased; preserve the database and start a new run or request")
      )
    }
    if (row.decision_principal_json !== null) return Effect.fail(corruptToken(row, "decision and resolution columns disagree"))
    return Effect.succeed({ _tag: "Pending", tokenId: row.token_id, target: target.right })
  }
  const decision = decodeDecision(row.decision_json, subject)
  if (Either.isLeft(decision)) return Effect.fail(decision.left)
  const decided = decision.right
  if (resolved !== (decided._tag !== "Pending")) return Effect.fail(corruptToken(row, "decision and resolution columns disagree"))
  if (decided._tag === "Pending") {
    if (row.decision_principal_json !== null) return Effect.fail(corruptToken(row, "decision and resolution columns disagree"))
  } else {
    const principal = row.decision_principal_json === null ? undefined : decodePrincipal(row.decision_principal_json, subject)
    if (principal !== undefined && Either.isLeft(principal)) return Effect.fail(principal.left)
    if (principal === undefined || canonical(principal.right) !== canonical(decided.decisionPrincipal)) {
      return Effect.fail(corruptToken(row, "decision and resolution columns disagree"))
    }
  }
  return Effect.succeed({ ...decided, tokenId: row.token_id, target: target.right })
}

/** Approval operations bound to one runtime context. */
export const makeApprovals = (ctx: SqlContext, authority: Authority) => {
  const { sql } = ctx

  const readToken = (tag: string, runId: string, targetId: string) =>
    sql<TokenRow>`SELECT target_tag, run_id, target_id, token_id, target_json, resolved, decision_principal_json, decision_json
      FROM control_tokens WHERE target_tag = ${tag} AND run_id = ${runId} AND target_id = ${targetId}`.pipe(
      persist("read an approval"),
      Effect.flatMap((rows) => (rows[0] === undefined ? Effect.succeed(undefined) : tokenOf(rows[0])))
    )

  const lookupApproval = (target: import("../ControlSchema.js").ApprovalTarget) =>
    Effect.gen(function*() {
      const id = identityOf(target)
      const token = yield* readToken(id.tag, id.runId, id.targetId)
      if (token === undefined) {
        return yield* Effect.fail(
          target._tag === "Plan" ? new PlanNotFound({ planId: target.planId }) : new RunNotFound({ runId: target.runId })
        )
      }
      yield* checkTarget(token.tokenId, token.target, target)
      if (token._tag !== "Pending") return yield* Effect.fail(new AlreadyResolved({ requestId: token.tokenId }))
      return token
    })

  const registerApproval = (target: NodeTarget) =>
    Effect.gen(function*() {
      yield* runExists(ctx, target.runId)
      yield* ctx.write(
        target.runId,
        "register an approval",
        sql`INSERT INTO control_tokens (target_tag, run_id, target_id, token_id, target_json, resolved,
            decision_principal_json, decision_json)
          VALUES ('Node', ${target.runId}, ${target.requestId}, ${target.requestId}, ${JSON.stringify(target)}, 0, NULL, NULL)
          ON CONFLICT (target_tag, run_id, target_id) DO NOTHING`
      )
      const token = yield* readToken("Node", target.runId, target.requestId)
      if (token === undefined) {
        return yield* Effect.fail(new PersistenceError({ operation: "register an approval", message: `token ${target.requestId} vanished` }))
      }
      yield* checkTarget(token.tokenId, token.target, target)
      return token
    })

  const installBulkGrant = (token: ApprovalToken, envelope: Envelope, scope: GrantScope) =>
    Effect.gen(function*() {
      const id = identityOf(token.target)
      const at = yield* ctx.now
      yield* ctx.write(
        id.tag === "Node" ? id.runId : undefined,
        "install a grant",
        sql`INSERT INTO control_grants (target_tag, run_id, target_id, token_id, envelope_json, scope, installed_at_ms)
          VALUES (${id.tag}, ${id.runId}, ${id.targetId}, ${token.tokenId}, ${JSON.stringify(envelope)}, ${scope}, ${at})
          ON CONFLICT (target_tag, run_id, target_id) DO NOTHING`
      )
    })

  const resolveApproval = (
    token: ApprovalToken,
    decision: "approved" | "denied",
    principal: Principal,
    scope: GrantScope = "once",
    reason?: string
  ) =>
    Effect.gen(function*() {
      yield* checkReason(reason)
      const captured = yield* Effect.try({
        try: () => structuredClone({ target: token.target, principal, tokenId: token.tokenId, reason }),
        catch: (cause) => new PersistenceError({ operation: "resolve an approval", message: "could not capture the decision", cause })
      })
      const decidedAt = yield* ctx.now
      const reasonPart = captured.reason === undefined ? {} : { reason: captured.reason }
      const decided = decision === "approved"
        ? { _tag: "Approved" as const, decisionPrincipal: captured.principal, decidedAt, scope, ...reasonPart }
        : { _tag: "Denied" as const, decisionPrincipal: captured.principal, decidedAt, ...reasonPart }
      yield* Schema.validate(ApprovalDecision)(decided).pipe(
        Effect.mapError((e) => new PersistenceError({ operation: "resolve an approval", message: e.message }))
      )
      const id = identityOf(captured.target)
      const updated = yield* ctx.write(
        id.tag === "Node" ? id.runId : undefined,
        "resolve an approval",
        Effect.gen(function*() {
          yield* authority.authorize({ principal: captured.principal, target: captured.target, decision, scope })
          const rows = yield* sql<{ token_id: string }>`UPDATE control_tokens
            SET resolved = 1, decision_principal_json = ${JSON.stringify(captured.principal)}, decision_json = ${JSON.stringify(decided)}
            WHERE target_tag = ${id.tag} AND run_id = ${id.runId} AND target_id = ${id.targetId} AND resolved = 0
            RETURNING token_id`
          if (rows.length > 0 && id.tag === "Plan") {
            yield* sql`UPDATE control_plans SET decision = ${decision} WHERE plan_id = ${id.targetId}`
          }
          return rows.length > 0
        })
      )
      if (!updated) return yield* Effect.fail(new AlreadyResolved({ requestId: captured.tokenId }))
    })

  const grants = sql<{
    target_tag: string
    run_id: string
    target_id: string
    token_id: string
    envelope_json: string
    scope: string
    installed_at_ms: number
  }>`SELECT target_tag, run_id, target_id, token_id, envelope_json, scope, installed_at_ms FROM control_grants
    ORDER BY installed_at_ms, target_tag, run_id, target_id`.pipe(
    persist("read grants"),
    Effect.flatMap((rows) =>
      Effect.forEach(rows, (row): Effect.Effect<BulkGrant, PersistenceError> => {
        const envelope = decodeEnvelope(row.envelope_json, `grant ${row.token_id}`)
        if (Either.isLeft(envelope)) return Effect.fail(envelope.left)
        const scope = decodeScope(row.scope, `grant ${row.token_id}`)
        if (Either.isLeft(scope)) return Effect.fail(scope.left)
        return Effect.succeed({ tokenId: row.token_id, envelope: envelope.right, scope: scope.right, installedAt: Number(row.installed_at_ms) })
      })
    )
  )

  return { lookupApproval, registerApproval, installBulkGrant, resolveApproval, grants }
}
