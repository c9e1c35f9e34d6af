/**
 * Two NodeRuntime hosts in one process over one database (runtime-incarnation.test.ts on SQLite,
 * runtime-incarnation.pg.test.ts on PostgreSQL): each runtime is its own incarnation, so while
 * host one drives a run, host two's `Control.resume` neither joins host one's fence nor drives the
 * run (a live peer holds it: `ClaimLost`), and the step body runs once.
 */
import * as Control from "@baton/control/Control"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Companion from "@baton/journal/Companion"
import { expect } from "@effect/vitest"
import { type Context, Deferred, Effect, Layer, Schema, type Scope } from "effect"
import * as Flow from "../src/Flow.js"
import * as NodeRuntime from "../src/NodeRuntime.js"
import * as Run from "../src/Run.js"
import * as Step from "../src/Step.js"
import { awaitStatus, expectCompleted, launch } from "./fixtures/runtimeSupport.js"

/** A flow whose only step counts its body runs and blocks until the gate opens. */
export const blockingFlow = () => {
  const bodies: Array<string> = []
  const entered = Effect.runSync(Deferred.make<void>())
  const gate = Effect.runSync(Deferred.make<void>())
  const flow = Flow.make({
    id: "incarnation.block",
    description: "one step that blocks until the test opens its gate",
    version: "1",
    input: Schema.Unknown,
    handler: () =>
      Effect.gen(function*() {
        const { runId } = yield* Run.Run
        return yield* Step.run(
          "block",
          Effect.gen(function*() {
            bodies.push(runId)
            yield* Deferred.succeed(entered, undefined)
            yield* Deferred.await(gate)
            return "done"
          })
        )
      })
  })
  return { flow, bodies, entered, gate }
}

const inContext = <R>(context: Context.Context<R>) => <A, E>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, context)

/** The scenario over `host(flows)`, which builds one host-mode NodeRuntime on the shared database. */
export const secondRuntimeDoesNotJoin = (
  host: (flows: ReadonlyArray<Flow.Any>) => Layer.Layer<NodeRuntime.Provided, NodeRuntime.BuildError>
): Effect.Effect<void, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const { bodies, entered, flow, gate } = blockingFlow()
    const one = yield* Layer.build(host([flow]))
    const two = yield* Layer.build(host([flow]))
    const idOne = yield* Effect.map(NodeRuntime.NodeHost, (h) => h.identity).pipe(inContext(one))
    const idTwo = yield* Effect.map(NodeRuntime.NodeHost, (h) => h.identity).pipe(inContext(two))
    // One process: the same host id and pid, but each runtime its own incarnation.
    expect(idTwo.hostId).toBe(idOne.hostId)
    expect(idTwo.pid).toBe(idOne.pid)
    expect(idTwo.incarnation).not.toBe(idOne.incarnation)

    const runId = yield* launch(flow.id, null).pipe(inContext(one))
    yield* Deferred.await(entered).pipe(Effect.timeout("30 seconds"))
    yield* awaitStatus(runId, ["running"]).pipe(inContext(one))

    const refused = yield* Effect.flatMap(Control.Control, (c) =>
      c.resume({ runId, idempotencyKey: `resume-from-two-${runId}` })).pipe(inContext(two), Effect.flip)
    expect(refused._tag).toBe("ClaimLost")
    const fenceOfTwo = yield* Effect.flatMap(ControlRuntime.ControlRuntime, (r) => r.claimFence(runId)).pipe(
      inContext(two),
      Effect.flip
    )
    expect(fenceOfTwo._tag).toBe("ClaimLost")
    for (let i = 0; i < 3; i++) yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.sweepNow).pipe(inContext(two))
    expect(yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.owned).pipe(inContext(two))).toEqual([])
    expect((yield* Effect.flatMap(NodeRuntime.NodeHost, (h) => h.owned).pipe(inContext(one))).map((o) => o.runId))
      .toEqual([runId])

    yield* Deferred.succeed(gate, undefined)
    yield* expectCompleted(runId).pipe(inContext(one))
    expect(bodies).toEqual([runId])
    const facts = yield* Companion.entries(Companion.runStore.stream, runId, { limit: 100 }).pipe(inContext(one))
    const activated = facts.entries.filter((e) => e.eventType === "flows.consensus.activated")
    expect(activated).toHaveLength(1)
    expect((activated[0]!.payload as { owner: { nonce: string } }).owner.nonce.startsWith(`${idOne.incarnation}.`))
      .toBe(true)
  })
