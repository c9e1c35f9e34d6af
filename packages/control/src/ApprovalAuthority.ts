/**
 * Who may decide an approval: a snapshot of delegations from principal
 * identities to target kinds and grant scopes.
 *
 * A policy runs inside the approval's write transaction, so it must be bounded
 * and must not call `Control`.
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import * as ControlError from "./ControlError.js"
import type * as ControlSchema from "./ControlSchema.js"

/**
 * One authorization question: may `principal` record `decision` (with the
 * approved `scope`) on `target`?
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  readonly principal: ControlSchema.Principal
  readonly target: ControlSchema.ApprovalTarget
  readonly decision: "approved" | "denied"
  readonly scope: ControlSchema.GrantScope
}

/**
 * An approval authority. `authorize` succeeds when the request is allowed and
 * fails `Unauthorized` otherwise; a host-supplied authority may also fail
 * `PersistenceError` when it cannot decide.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly authorize: (
    request: Request
  ) => Effect.Effect<void, ControlError.Unauthorized | ControlError.PersistenceError>
}

const Bounded = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1024))
const Scope = Schema.Literal("once", "run", "remembered")
const TargetKind = Schema.Literal("Plan", "Node")

/**
 * One delegation: the exact identity `(principal.id, principal.kind)` may
 * decide targets of the listed kinds, approving with the listed scopes
 * (1–3 scopes, 1–2 target kinds; ids and kinds 1–1,024 characters).
 *
 * @since 0.1.0
 * @category models
 */
export const Delegation = Schema.Struct({
  principal: Schema.Struct({ id: Bounded, kind: Bounded }),
  scopes: Schema.Array(Scope).pipe(Schema.minItems(1), Schema.maxItems(3)),
  targets: Schema.Array(TargetKind).pipe(Schema.minItems(1), Schema.maxItems(2))
})

/**
 * @since 0.1.0
 * @category models
 */
export type Delegation = typeof Delegation.Type

/**
 * Largest number of delegations `make` accepts.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxDelegations = 1024

const Delegations = Schema.Array(Delegation).pipe(Schema.maxItems(maxDelegations))
const decodeDelegations = Schema.decodeUnknownEither(Delegations, { onExcessProperty: "error" })

const refusal = () => new ControlError.Unauthorized({ message: "caller may not make this approval decision" })

// The permission index key: the identity pair and the target kind, joined with
// a separator that JSON-encodes both parts so no two pairs can collide.
const indexKey = (id: string, kind: string, target: "Plan" | "Node") => JSON.stringify([id, kind, target])

/**
 * Builds an authority from delegations. The configuration is decoded strictly
 * (excess properties refused, at most 1,024 entries) and snapshotted, so a
 * caller mutating its array afterwards changes nothing.
 *
 * A request is allowed iff some delegation names exactly the principal's
 * `(id, kind)` and the target's kind, and either the decision is a denial
 * (denying needs no scope) or the approved scope is one the delegations of
 * that (identity, target kind) pair grant. Scopes are not hierarchical and a
 * principal's `kind` alone is never a role.
 *
 * Fails `InvalidInput("Invalid approval-authority delegation configuration")`
 * without echoing the configuration.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  delegations: ReadonlyArray<Delegation>
): Effect.Effect<Service, ControlError.InvalidInput> =>
  Effect.suspend(() => {
    let decoded: ReadonlyArray<Delegation>
    try {
      const result = decodeDelegations(delegations)
      if (result._tag === "Left") {
        return Effect.fail(
          new ControlError.InvalidInput({ issue: "Invalid approval-authority delegation configuration" })
        )
      }
      decoded = result.right
    } catch {
      // A hostile configuration (throwing getters, proxies) is refused like any invalid one.
      return Effect.fail(
        new ControlError.InvalidInput({ issue: "Invalid approval-authority delegation configuration" })
      )
    }
    const index = new Map<string, Set<ControlSchema.GrantScope>>()
    for (const delegation of decoded) {
      for (const target of delegation.targets) {
        const key = indexKey(delegation.principal.id, delegation.principal.kind, target)
        const scopes = index.get(key) ?? new Set<ControlSchema.GrantScope>()
        for (const scope of delegation.scopes) scopes.add(scope)
        index.set(key, scopes)
      }
    }
    const service: Service = {
      authorize: (request) =>
        Effect.suspend(() => {
          const scopes = index.get(indexKey(request.principal.id, request.principal.kind, request.target._tag))
          if (scopes === undefined) return Effect.fail(refusal())
          if (request.decision === "denied") return Effect.void
          return scopes.has(request.scope) ? Effect.void : Effect.fail(refusal())
        })
    }
    return Effect.succeed(Object.freeze(service))
  })

/**
 * The local operator authority: `{ id: "local", kind: "operator" }` may decide
 * plan and node targets with every scope; everyone else is refused.
 *
 * @since 0.1.0
 * @category constructors
 */
export const local: Service = Effect.runSync(
  make([{
    principal: { id: "local", kind: "operator" },
    scopes: ["once", "run", "remembered"],
    targets: ["Plan", "Node"]
  }])
)
