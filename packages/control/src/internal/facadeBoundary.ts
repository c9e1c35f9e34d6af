/**
 * The facade's inert JSON boundary (docs/design/control.md): every mutation input is deep
 * copied from own data properties only before anything reads it, so getters,
 * `toJSON`, proxies' `get` traps and later caller mutation cannot influence
 * what is decided or written.
 */
import { Effect, Either, type ParseResult, Schema } from "effect"
import * as ControlError from "../ControlError.js"
import { arrayLength, isDurableText, isDurableTextOfLength } from "./canonical.js"
import { describeIssue, renderPath as render } from "./schemaIssue.js"

export const maxTextUnits = 4 * 1024 * 1024
export const maxDepth = 128
export const maxNodes = 100_000

class Refusal {
  constructor(readonly complaint: string) {}
}

const copy = (value: unknown): unknown => {
  let nodes = 0
  let text = 0
  const stack = new Set<object>()
  const visit = (current: unknown, path: Array<string | number>, depth: number): unknown => {
    nodes++
    if (nodes > maxNodes) throw new Refusal(`more than ${maxNodes} values`)
    if (depth > maxDepth) throw new Refusal(`${render(path)}: nested deeper than ${maxDepth}`)
    switch (typeof current) {
      case "string": {
        text += current.length
        if (text > maxTextUnits) throw new Refusal(`more than ${maxTextUnits} characters of text`)
        if (!isDurableText(current)) {
          throw new Refusal(`${render(path)}: contains U+0000 or an unpaired surrogate`)
        }
        return current
      }
      case "number":
        if (!Number.isFinite(current)) throw new Refusal(`${render(path)}: is not a finite number`)
        return current
      case "boolean":
        return current
      case "undefined":
        throw new Refusal(`${render(path)}: undefined is not JSON`)
      case "bigint":
        throw new Refusal(`${render(path)}: a bigint is not JSON`)
      case "function":
        throw new Refusal(`${render(path)}: a function is not JSON`)
      case "symbol":
        throw new Refusal(`${render(path)}: a symbol is not JSON`)
    }
    if (current === null) return null
    const object = current as object
    if (stack.has(object)) throw new Refusal(`${render(path)}: is a cycle`)
    const isArray = Array.isArray(object)
    const proto = Object.getPrototypeOf(object)
    if (!isArray && proto !== Object.prototype && proto !== null) {
      throw new Refusal(`${render(path)}: is not a plain object`)
    }
    stack.add(object)
    const descriptors = Object.getOwnPropertyDescriptors(object)
    let result: unknown
    if (isArray) {
      const length = arrayLength(object, descriptors.length)
      if (length === undefined) throw new Refusal(`${render(path)}: array length is not a non-negative integer`)
      const out: Array<unknown> = []
      for (const key of Reflect.ownKeys(descriptors)) {
        if (key === "length") continue
        if (typeof key === "symbol" || !/^(0|[1-9][0-9]*)$/.test(key) || Number(key) >= length) {
          throw new Refusal(`${render(path)}: array has a non-index property`)
        }
      }
      for (let index = 0; index < length; index++) {
        const descriptor = descriptors[index]
        if (descriptor === undefined) throw new Refusal(`${render([...path, index])}: is a hole`)
        if (!("value" in descriptor)) throw new Refusal(`${render([...path, index])}: is an accessor`)
        out.push(visit(descriptor.value, [...path, index], depth + 1))
      }
      result = out
    } else {
      const out: Record<string, unknown> = {}
      for (const key of Reflect.ownKeys(descriptors)) {
        if (typeof key === "symbol") throw new Refusal(`${render(path)}: has a symbol key`)
        const descriptor = descriptors[key]!
        if (!("value" in descriptor)) throw new Refusal(`${render([...path, key])}: is an accessor`)
        if (!descriptor.enumerable) continue
        if (!isDurableText(key)) throw new Refusal(`${render(path)}: a key contains U+0000 or an unpaired surrogate`)
        // Like JSON, an undefined member is an absent member.
        if (descriptor.value === undefined) continue
        text += key.length
        if (text > maxTextUnits) throw new Refusal(`more than ${maxTextUnits} characters of text`)
        Object.defineProperty(out, key, {
          value: visit(descriptor.value, [...path, key], depth + 1),
          enumerable: true,
          writable: true,
          configurable: true
        })
      }
      result = out
    }
    stack.delete(object)
    return result
  }
  return visit(value, [], 0)
}

/**
 * Admits one mutation input: inert copy, then schema decoding.
 * Fails `InvalidInput("<operation>: <complaint>")` or
 * `InvalidInput("<operation>: invalid mutation at <path>: <rule>")` (the rule:
 * the expected type or allowed values, "is required", or "unknown field").
 */
export const admit = <A, I>(
  operation: string,
  schema: Schema.Schema<A, I>,
  value: unknown,
  texts: ReadonlyArray<TextRule> = []
): Effect.Effect<A, ControlError.InvalidInput> =>
  Effect.suspend(() => {
    // Named durable-text fields get their own message, even when the general
    // boundary would also refuse them (NUL, lone surrogates).
    if (typeof value === "object" && value !== null) {
      for (const rule of texts) {
        let descriptor: PropertyDescriptor | undefined
        try {
          descriptor = Object.getOwnPropertyDescriptor(value, rule.field)
        } catch {
          descriptor = undefined
        }
        if (descriptor === undefined || !("value" in descriptor) || descriptor.value === undefined) continue
        if (!isDurableTextOfLength(descriptor.value, rule.max)) {
          return Effect.fail(new ControlError.InvalidInput({ issue: rule.issue }))
        }
      }
    }
    let copied: unknown
    try {
      copied = copy(value)
    } catch (cause) {
      if (cause instanceof Refusal) {
        return Effect.fail(new ControlError.InvalidInput({ issue: `${operation}: ${cause.complaint}` }))
      }
      // A proxy or exotic object whose descriptor traps throw is refused too.
      return Effect.fail(new ControlError.InvalidInput({ issue: `${operation}: input is not inert JSON data` }))
    }
    const decoded = syncDecoder(schema)(copied)
    if (Either.isRight(decoded)) return Effect.succeed(decoded.right)
    // A schema that cannot decode synchronously is decoded as an Effect, with the same answer.
    if (decoded.left.issue._tag === "Forbidden") {
      return Schema.decodeUnknown(schema, { onExcessProperty: "error" })(copied).pipe(
        Effect.mapError((error) => invalidAt(operation, error))
      )
    }
    return Effect.fail(invalidAt(operation, decoded.left))
  })

const invalidAt = (operation: string, error: ParseResult.ParseError) =>
  new ControlError.InvalidInput({ issue: `${operation}: invalid mutation at ${describeIssue(error)}` })

// Input schemas are module constants: each one's decoder is built once.
const syncDecoders = new WeakMap<Schema.Schema.Any, (input: unknown) => Either.Either<unknown, ParseResult.ParseError>>()

const syncDecoder = <A, I>(schema: Schema.Schema<A, I>): (input: unknown) => Either.Either<A, ParseResult.ParseError> => {
  let decode = syncDecoders.get(schema)
  if (decode === undefined) {
    decode = Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })
    syncDecoders.set(schema, decode)
  }
  return decode as (input: unknown) => Either.Either<A, ParseResult.ParseError>
}

/** A top-level durable-text field and the issue it fails with. */
export interface TextRule {
  readonly field: string
  readonly max: number
  readonly issue: string
}

/** The idempotency-key rule of `operation`. */
export const keyRule = (operation: string): TextRule => ({
  field: "idempotencyKey",
  max: 1024,
  issue: `${operation}.idempotencyKey: must be 1 to 1024 well-formed characters`
})

/**
 * The free-text `reason` rule of `operation`: every reason the facade takes
 * (approve, deny, cancel, resume, run with a Resume input) is durable text of
 * 1..1000 UTF-16 units, the approval rule (`DecisionReason`), so a reason that
 * is journaled and shown back is bounded and non-empty whichever verb took it.
 */
export const reasonRule = (operation: string): TextRule => ({
  field: "reason",
  max: 1000,
  issue: `${operation}.reason: must be 1 to 1000 well-formed characters`
})

/** Idempotency keys: 1..1024 UTF-16 units, no NUL, no unpaired surrogate. */
export const requireKey = (operation: string, key: string): Effect.Effect<void, ControlError.InvalidInput> =>
  isDurableTextOfLength(key, 1024)
    ? Effect.void
    : Effect.fail(
      new ControlError.InvalidInput({ issue: `${operation}.idempotencyKey: must be 1 to 1024 well-formed characters` })
    )

/**
 * Admits an id given as a bare argument (`getRun(runId)`): a string of 1..1024
 * UTF-16 units with no U+0000 and no unpaired surrogate. The value itself is
 * never echoed (it may hold the very characters refused).
 */
export const admitId = (
  operation: string,
  field: string,
  value: unknown
): Effect.Effect<string, ControlError.InvalidInput> =>
  typeof value === "string" && isDurableTextOfLength(value, 1024)
    ? Effect.succeed(value)
    : Effect.fail(
      new ControlError.InvalidInput({
        issue: `${operation}.${field}: must be a string of 1 to 1024 characters without U+0000 or unpaired surrogates, received ${
          typeof value === "string" ? `a string of ${value.length} characters` : typeof value === "object" && value !== null ? "an object" : typeof value
        }`
      })
    )
