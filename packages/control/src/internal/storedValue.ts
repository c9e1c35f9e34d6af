/**
 * Decoding stored values (rows, journal payloads): every failure is one `PersistenceError` naming
 * `table.column`, the member path and the rule — never the stored value, which may hold anything.
 */
import { Either, ParseResult, Schema, SchemaAST } from "effect"
import { PersistenceError } from "../ControlError.js"

const expectedOf = (message: string): string | undefined => /^Expected ([\s\S]*?), actual [\s\S]*$/.exec(message)?.[1]

/**
 * The rule the first decoding issue states, without the actual value (`must be "a" | "b"`, `is required`).
 * Union members failing at the same path are merged into one list of allowed values.
 */
const ruleOf = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>): string => {
  const first = issues[0]!
  switch (first._tag) {
    case "Missing":
      return "is required"
    case "Unexpected":
      return "is not an allowed member"
    default: {
      const same = issues.filter((i) =>
        i._tag === first._tag && i.path.length === first.path.length && i.path.every((p, n) => p === first.path[n])
      )
      const expected = same.map((i) => expectedOf(i.message))
      if (expected.some((e) => e === undefined)) return "is not valid"
      // An optional member says "| undefined"; a stored value cannot be undefined, so it is not a choice.
      const text = [...new Set(expected.flatMap((e) => alternatives(e!)))].filter((e) => e !== "undefined").join(" | ")
      return `must be ${text.length > 120 ? `${text.slice(0, 117)}...` : text}`
    }
  }
}

/**
 * The top-level alternatives of an expected type, a struct or array named by its kind: the member
 * that failed is already in the path, so spelling out the whole declared shape says nothing more.
 */
const alternatives = (expected: string): Array<string> => {
  const parts: Array<string> = []
  let depth = 0
  let start = 0
  for (let i = 0; i < expected.length; i++) {
    const c = expected[i]
    if (c === "{" || c === "<" || c === "[" || c === "(") depth++
    else if (c === "}" || c === ">" || c === "]" || c === ")") depth--
    else if (depth === 0 && expected.startsWith(" | ", i)) {
      parts.push(expected.slice(start, i))
      start = i + 3
      i += 2
    }
  }
  parts.push(expected.slice(start))
  return parts.map((p) =>
    p.startsWith("{") ? "an object" : p.startsWith("ReadonlyArray<") || p.startsWith("readonly [") || p.startsWith("[") ? "an array" : p
  )
}

/** Every property name the schema declares: a path member outside this set is a stored key and is masked. */
const declaredNames = (ast: SchemaAST.AST, into = new Set<string>(), seen = new Set<SchemaAST.AST>()): Set<string> => {
  if (seen.has(ast)) return into
  seen.add(ast)
  switch (ast._tag) {
    case "TypeLiteral":
      for (const p of ast.propertySignatures) {
        if (typeof p.name === "string") into.add(p.name)
        declaredNames(p.type, into, seen)
      }
      for (const i of ast.indexSignatures) declaredNames(i.type, into, seen)
      break
    case "Union":
      for (const t of ast.types) declaredNames(t, into, seen)
      break
    case "TupleType":
      for (const e of ast.elements) declaredNames(e.type, into, seen)
      for (const r of ast.rest) declaredNames(r.type, into, seen)
      break
    case "Refinement":
      declaredNames(ast.from, into, seen)
      break
    case "Transformation":
      declaredNames(ast.from, into, seen)
      declaredNames(ast.to, into, seen)
      break
    case "Suspend":
      declaredNames(ast.f(), into, seen)
      break
    default:
      break
  }
  return into
}

const pathOf = (path: ReadonlyArray<PropertyKey>, names: ReadonlySet<string>): string =>
  path.map((p) => (typeof p === "number" ? `[${p}]` : typeof p === "string" && names.has(p) ? `.${p}` : ".<key>"))
    .join("").replace(/^\./, "")

/**
 * A corrupt stored value: operation `decode <table.column>`, message `<subject>: <table.column>[ at <path>]: <rule>`.
 * `subject` names the row by its key (`run r-1`), never by the corrupt value.
 */
export const corrupt = (column: string, subject: string, rule: string, path?: string): PersistenceError =>
  new PersistenceError({
    operation: `decode ${column}`,
    message: `${subject}: ${column}${path === undefined || path === "" ? "" : ` at ${path}`}: ${rule}`
  })

/** A check of one scalar member type (a string, a number, a boolean, literals); `undefined` for any other. */
const scalarCheck = (ast: SchemaAST.AST): ((value: unknown) => boolean) | undefined => {
  switch (ast._tag) {
    case "StringKeyword":
      return (value) => typeof value === "string"
    case "NumberKeyword":
      return (value) => typeof value === "number"
    case "BooleanKeyword":
      return (value) => typeof value === "boolean"
    case "Literal": {
      const literal = ast.literal
      return (value) => value === literal
    }
    case "UndefinedKeyword":
      // A stored value never holds undefined: such a member is left to the schema.
      return () => false
    case "Union": {
      const checks = ast.types.map(scalarCheck)
      if (checks.some((c) => c === undefined)) return undefined
      if (ast.types.every((t) => t._tag === "Literal" || t._tag === "UndefinedKeyword")) {
        const literals = new Set(ast.types.flatMap((t) => (t._tag === "Literal" ? [t.literal] : [])))
        return (value) => literals.has(value as SchemaAST.LiteralValue)
      }
      return (value) => checks.some((c) => c!(value))
    }
    default:
      return undefined
  }
}

/**
 * The common case of a struct decoded without the schema's interpreter: an object whose members are all
 * declared, scalar (see `scalarCheck`) and of their declared type decodes to a copy of those members in
 * declaration order, as the schema answers it. Anything else (a missing required member, a member of
 * another type, a structured or refined member, an undeclared one) answers `undefined`, and the schema
 * decides, so the answer and every failure are the schema's own. The values it meets are parsed JSON (own
 * enumerable members only). `undefined` for a schema that is not a plain struct.
 */
const plainStruct = (ast: SchemaAST.AST): ((input: unknown) => object | undefined) | undefined => {
  if (ast._tag !== "TypeLiteral" || ast.indexSignatures.length > 0) return undefined
  if (ast.propertySignatures.some((p) => typeof p.name !== "string")) return undefined
  const members = ast.propertySignatures.map((p) => ({
    name: p.name as string,
    optional: p.isOptional,
    check: scalarCheck(p.type)
  }))
  const position = new Map(members.map((m, i) => [m.name, i]))
  const required = members.flatMap((m, i) => (m.optional ? [] : [i]))
  return (input) => {
    if (typeof input !== "object" || input === null || Array.isArray(input)) return undefined
    const record = input as Record<string, unknown>
    // The value's own members are visited (a stored summary has a few of the many declared), then the
    // answer is built in declaration order.
    const values: Array<unknown> = new Array(members.length)
    for (const name of Object.keys(record)) {
      const i = position.get(name)
      // Undeclared or undefined-valued members: the schema decides what they mean.
      if (i === undefined) return undefined
      const value = record[name]
      const check = members[i]!.check
      if (value === undefined || check === undefined || !check(value)) return undefined
      values[i] = value
    }
    for (const i of required) if (values[i] === undefined) return undefined
    const out: Record<string, unknown> = {}
    for (let i = 0; i < members.length; i++) if (values[i] !== undefined) out[members[i]!.name] = values[i]
    return out
  }
}

/**
 * A decoder of one stored column: `schema` applied to the value (or, with `json`, to the parsed text);
 * a failure is `corrupt(column, subject, rule, path)` and carries no cause (the cause would hold the value).
 * A plain struct's common case skips the schema's interpreter (see `plainStruct`), with the same answer.
 */
export const decoder = <A, I>(schema: Schema.Schema<A, I>, column: string, options?: { readonly json?: boolean }) => {
  const decode = Schema.decodeUnknownEither(schema)
  const plain = plainStruct(schema.ast)
  const names = declaredNames(schema.ast)
  return (value: unknown, subject: string): Either.Either<A, PersistenceError> => {
    let input = value
    if (options?.json === true) {
      if (typeof value !== "string") return Either.left(corrupt(column, subject, "must be JSON text"))
      try {
        input = JSON.parse(value)
      } catch {
        return Either.left(corrupt(column, subject, "is not JSON"))
      }
    }
    const fast = plain?.(input)
    if (fast !== undefined) return Either.right(fast as A)
    const result = decode(input)
    if (Either.isRight(result)) return Either.right(result.right)
    const issues = ParseResult.ArrayFormatter.formatErrorSync(result.left)
    return Either.left(
      issues.length === 0
        ? corrupt(column, subject, "is not valid")
        : corrupt(column, subject, ruleOf(issues), pathOf(issues[0]!.path, names))
    )
  }
}
