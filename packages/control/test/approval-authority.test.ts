import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as ApprovalAuthority from "../src/ApprovalAuthority.js"
import type * as ControlSchema from "../src/ControlSchema.js"

const envelope: ControlSchema.Envelope = { capabilities: ["process:spawn"], flows: [], budget: {} }
const planTarget: ControlSchema.ApprovalTarget = { _tag: "Plan", planId: "plan-1", digest: "d", envelope }
const nodeTarget: ControlSchema.ApprovalTarget = { _tag: "Node", runId: "run-1", requestId: "r", digest: "d", envelope }
const principal = (id: string, kind: string): ControlSchema.Principal => ({ id, kind, stampedAt: 0 })

const allowed = (
  service: ApprovalAuthority.Service,
  request: ApprovalAuthority.Request
) => service.authorize(request).pipe(Effect.exit, Effect.map(Exit.isSuccess))

describe("ApprovalAuthority", () => {
  it.effect("local lets local/operator decide every scope on plans and nodes", () =>
    Effect.gen(function*() {
      for (const target of [planTarget, nodeTarget]) {
        for (const scope of ["once", "run", "remembered"] as const) {
          expect(yield* allowed(ApprovalAuthority.local, {
            principal: principal("local", "operator"),
            target,
            decision: "approved",
            scope
          })).toBe(true)
        }
      }
    }))

  it.effect("local refuses every other identity with Unauthorized, even one whose kind is operator", () =>
    Effect.gen(function*() {
      const error = yield* ApprovalAuthority.local.authorize({
        principal: principal("bob", "operator"),
        target: planTarget,
        decision: "denied",
        scope: "once"
      }).pipe(Effect.flip)
      expect(error._tag).toBe("Unauthorized")
      expect(error.code).toBe("unauthorized")
      expect(error.message).toBe("caller may not make this approval decision")
    }))

  it.effect("a delegation's scopes never apply to a target kind it does not list", () =>
    Effect.gen(function*() {
      const authority = yield* ApprovalAuthority.make([
        { principal: { id: "alice", kind: "human" }, scopes: ["run"], targets: ["Plan"] }
      ])
      const alice = principal("alice", "human")
      expect(yield* allowed(authority, { principal: alice, target: planTarget, decision: "approved", scope: "run" })).toBe(true)
      expect(yield* allowed(authority, { principal: alice, target: nodeTarget, decision: "approved", scope: "run" })).toBe(false)
      expect(yield* allowed(authority, { principal: alice, target: nodeTarget, decision: "denied", scope: "run" })).toBe(false)
    }))

  it.effect("approving needs a granted scope, denying needs none, and scopes are not hierarchical", () =>
    Effect.gen(function*() {
      const authority = yield* ApprovalAuthority.make([
        { principal: { id: "alice", kind: "human" }, scopes: ["remembered"], targets: ["Plan"] }
      ])
      const alice = principal("alice", "human")
      expect(yield* allowed(authority, { principal: alice, target: planTarget, decision: "approved", scope: "once" })).toBe(false)
      expect(yield* allowed(authority, { principal: alice, target: planTarget, decision: "approved", scope: "remembered" })).toBe(true)
      expect(yield* allowed(authority, { principal: alice, target: planTarget, decision: "denied", scope: "once" })).toBe(true)
    }))

  it.effect("the scopes of every delegation naming one identity and target kind are unioned", () =>
    Effect.gen(function*() {
      const authority = yield* ApprovalAuthority.make([
        { principal: { id: "alice", kind: "human" }, scopes: ["once"], targets: ["Node"] },
        { principal: { id: "alice", kind: "human" }, scopes: ["run"], targets: ["Node", "Plan"] }
      ])
      const alice = principal("alice", "human")
      expect(yield* allowed(authority, { principal: alice, target: nodeTarget, decision: "approved", scope: "once" })).toBe(true)
      expect(yield* allowed(authority, { principal: alice, target: nodeTarget, decision: "approved", scope: "run" })).toBe(true)
      expect(yield* allowed(authority, { principal: alice, target: planTarget, decision: "approved", scope: "once" })).toBe(false)
      // Same id, other kind: a different identity.
      expect(yield* allowed(authority, {
        principal: principal("alice", "agent"),
        target: nodeTarget,
        decision: "approved",
        scope: "once"
      })).toBe(false)
    }))

  it.effect("make snapshots its configuration: mutating the array afterwards changes nothing", () =>
    Effect.gen(function*() {
      const delegations: Array<ApprovalAuthority.Delegation> = [
        { principal: { id: "alice", kind: "human" }, scopes: ["once"], targets: ["Plan"] }
      ]
      const authority = yield* ApprovalAuthority.make(delegations)
      delegations.push({ principal: { id: "mallory", kind: "human" }, scopes: ["once"], targets: ["Plan"] })
      ;(delegations[0]!.scopes as Array<string>).push("remembered")
      expect(yield* allowed(authority, {
        principal: principal("mallory", "human"),
        target: planTarget,
        decision: "approved",
        scope: "once"
      })).toBe(false)
      expect(yield* allowed(authority, {
        principal: principal("alice", "human"),
        target: planTarget,
        decision: "approved",
        scope: "remembered"
      })).toBe(false)
    }))

  it.effect("invalid configurations fail InvalidInput without echoing the configuration", () =>
    Effect.gen(function*() {
      const bad: ReadonlyArray<unknown> = [
        [{ principal: { id: "secret-id", kind: "human" }, scopes: ["once"], targets: ["Plan"], extra: 1 }],
        [{ principal: { id: "secret-id", kind: "human", role: "admin" }, scopes: ["once"], targets: ["Plan"] }],
        [{ principal: { id: "", kind: "human" }, scopes: ["once"], targets: ["Plan"] }],
        [{ principal: { id: "secret-id", kind: "x".repeat(1025) }, scopes: ["once"], targets: ["Plan"] }],
        [{ principal: { id: "secret-id", kind: "human" }, scopes: [], targets: ["Plan"] }],
        [{ principal: { id: "secret-id", kind: "human" }, scopes: ["once", "run", "remembered", "once"], targets: ["Plan"] }],
        [{ principal: { id: "secret-id", kind: "human" }, scopes: ["forever"], targets: ["Plan"] }],
        [{ principal: { id: "secret-id", kind: "human" }, scopes: ["once"], targets: [] }],
        [{ principal: { id: "secret-id", kind: "human" }, scopes: ["once"], targets: ["Run"] }],
        Array.from({ length: 1025 }, () => ({ principal: { id: "secret-id", kind: "h" }, scopes: ["once"], targets: ["Plan"] }))
      ]
      for (const configuration of bad) {
        const error = yield* ApprovalAuthority.make(configuration as ReadonlyArray<ApprovalAuthority.Delegation>).pipe(
          Effect.flip
        )
        expect(error._tag).toBe("InvalidInput")
        expect(error.issue).toBe("Invalid approval-authority delegation configuration")
        expect(error.issue).not.toContain("secret-id")
      }
    }))

  it.effect("exactly 1,024 delegations are accepted", () =>
    Effect.gen(function*() {
      const authority = yield* ApprovalAuthority.make(
        Array.from({ length: 1024 }, (_, i) => ({
          principal: { id: `p${i}`, kind: "h" },
          scopes: ["once"] as const,
          targets: ["Node"] as const
        }))
      )
      expect(yield* allowed(authority, {
        principal: principal("p1023", "h"),
        target: nodeTarget,
        decision: "approved",
        scope: "once"
      })).toBe(true)
    }))
})
