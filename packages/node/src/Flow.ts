/**
 * Flows: a named, versioned handler over a decoded input, run by the node executor as a
 * durable run made of named steps.
 *
 * @since 0.1.0
 */
import * as ControlError from "@baton/control/ControlError"
import type * as ControlRuntime from "@baton/control/ControlRuntime"
import type * as ControlSchema from "@baton/control/ControlSchema"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, ParseResult, Schema } from "effect"
import * as crypto from "node:crypto"
import { isJson } from "./internal/executorJson.js"
import type { Run } from "./Run.js"

/**
 * The services a handler may use without providing them: the drive's `Run`, the runtime's
 * `SqlClient` (reads; writes belong in a step's `commit`), `FileSystem` and `Path`.
 *
 * @since 0.1.0
 * @category models
 */
export type Services = Run | SqlClient.SqlClient | FileSystem.FileSystem | Path.Path

/**
 * What a flow author writes.
 * - `id`: `/^[a-z0-9][a-z0-9._\/-]{0,127}$/`;
 * - `description`: 1..1000 characters;
 * - `input`: decodes the run input; its encoded side must be JSON;
 * - `output`: encodes the result (default: the result must itself be JSON);
 * - `version`: the flow's code identity (1..128 characters); recommended, change it whenever the
 *   steps or their meaning change;
 * - `capabilities`, `budget`, `deployClass`: the plan envelope.
 *
 * @since 0.1.0
 * @category models
 */
export interface Definition<I, IE, A, AE, E, R extends Services> {
  readonly id: string
  readonly description: string
  readonly input: Schema.Schema<I, IE>
  readonly output?: Schema.Schema<A, AE>
  readonly version?: string
  readonly capabilities?: ReadonlyArray<string>
  readonly budget?: ControlSchema.Budget
  readonly deployClass?: boolean
  readonly handler: (input: I) => Effect.Effect<A, E, R>
}

/**
 * A flow the runtime can serve. Type parameters: decoded input, result, handler error.
 *
 * @since 0.1.0
 * @category models
 */
export interface Flow<I, A, E> {
  readonly _tag: "@baton/node/Flow"
  readonly id: string
  readonly description: string
  readonly input: Schema.Schema<I, any>
  readonly output: Schema.Schema<A, any> | undefined
  readonly version: string | undefined
  readonly capabilities: ReadonlyArray<string>
  readonly budget: ControlSchema.Budget | undefined
  readonly deployClass: boolean
  readonly handler: (input: I) => Effect.Effect<A, E, Services>
}

/**
 * Any flow, for catalogs.
 *
 * @since 0.1.0
 * @category models
 */
export type Any = Flow<any, any, any>

/**
 * Build a flow. Nothing is validated here: NodeRuntime validates the catalog when it builds
 * (ids, versions, duplicates), so a bad catalog fails the layer naming the flow.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <I, IE, A, AE, E, R extends Services>(
  definition: Definition<I, IE, A, AE, E, R>
): Flow<I, A, E> => ({
  _tag: "@baton/node/Flow",
  id: definition.id,
  description: definition.description,
  input: definition.input,
  output: definition.output,
  version: definition.version,
  capabilities: definition.capabilities ?? [],
  budget: definition.budget,
  deployClass: definition.deployClass ?? false,
  handler: definition.handler as (input: I) => Effect.Effect<A, E, Services>
})

const idPattern = /^[a-z0-9][a-z0-9._/-]{0,127}$/

/**
 * Why a flow cannot be served, or `undefined`: the rule broken by its id, description or
 * version (the message names the field).
 *
 * @since 0.1.0
 * @category validation
 */
export const issue = (flow: Any): { readonly field: string; readonly message: string } | undefined => {
  if (typeof flow.id !== "string" || !idPattern.test(flow.id)) {
    return { field: "id", message: "must match /^[a-z0-9][a-z0-9._\\/-]{0,127}$/" }
  }
  if (typeof flow.description !== "string" || flow.description.length < 1 || flow.description.length > 1000) {
    return { field: "description", message: "must be 1..1000 characters" }
  }
  if (flow.version !== undefined) {
    if (
      typeof flow.version !== "string" || flow.version.length < 1 || flow.version.length > 128 ||
      flow.version.includes("\u0000") || !wellFormed(flow.version)
    ) {
      return { field: "version", message: "must be 1..128 characters without U+0000 or unpaired surrogates" }
    }
  }
  return undefined
}

const wellFormed = (value: string): boolean => {
  try {
    encodeURIComponent(value)
    return true
  } catch {
    return false
  }
}

/**
 * The flow's code identity: `version` verbatim when given, else `"src:"` + hex sha256 of the
 * handler's source text (so editing the handler is drift; editing a helper it calls is not).
 *
 * @since 0.1.0
 * @category accessors
 */
export const codeIdentity = (flow: Any): string =>
  flow.version ?? `src:${crypto.createHash("sha256").update(Function.prototype.toString.call(flow.handler)).digest("hex")}`

/**
 * Decode a run input with the flow's schema, then encode it back: control stores the encoded
 * JSON form, so transforms run once at plan time. Failure → `InvalidInput` naming the path.
 *
 * @since 0.1.0
 * @category codecs
 */
export const normalizeInput = (flow: Any, input: unknown): Effect.Effect<unknown, ControlError.InvalidInput> =>
  Schema.decodeUnknown(flow.input)(input).pipe(
    Effect.flatMap(Schema.encode(flow.input)),
    Effect.mapError((error) =>
      new ControlError.InvalidInput({ issue: `input: ${ParseResult.TreeFormatter.formatErrorSync(error)}` })
    ),
    Effect.filterOrFail(
      (encoded) => isJson(encoded),
      () => new ControlError.InvalidInput({ issue: "input: encodes to a value that is not JSON" })
    )
  )

/**
 * Map a flow to control's `DurableFlow`: envelope `{ capabilities: sorted unique, flows: [id],
 * budget: budget ?? {} }`, `executionDigest` = {@link codeIdentity}, `decode` = {@link normalizeInput}.
 *
 * @since 0.1.0
 * @category conversions
 */
export const toDurableFlow = (flow: Any): ControlRuntime.DurableFlow => ({
  flowId: flow.id,
  description: flow.description,
  deployClass: flow.deployClass,
  envelope: {
    capabilities: Array.from(new Set(flow.capabilities)).sort(),
    flows: [flow.id],
    budget: flow.budget ?? {}
  },
  executionDigest: codeIdentity(flow),
  decode: (input: unknown) => normalizeInput(flow, input)
})
