/**
 * Secret scrubbing applied to every journal payload and meta before encoding:
 * sensitive keys by name, secrets inside strings by pattern. `redact` is a
 * fixed point: `redact(redact(x))` deep-equals `redact(x)`.
 *
 * @since 0.1.0
 */

/**
 * A textual rule: every match of `pattern` (global) becomes `replace`
 * (default {@link placeholder}); `$1`-style references are allowed.
 *
 * @since 0.1.0
 * @category models
 */
export interface Rule {
  readonly id: string
  readonly pattern: RegExp
  readonly replace?: string
}

/**
 * `rules` replace the default textual rules; `onTooDeep`: `"throw"` (the
 * journal's setting, default) or `"name"` (depth > 256 becomes {@link depthMarker}).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly rules?: ReadonlyArray<Rule>
  readonly onTooDeep?: "throw" | "name"
}

/**
 * @since 0.1.0
 * @category models
 */
export type Redactor = (value: unknown) => unknown

/**
 * @since 0.1.0
 * @category constants
 */
export const placeholder = "[REDACTED]"
/**
 * Deepest nesting walked.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxDepth = 256
/**
 * Binary views longer than this many elements are summarized without walking their members.
 *
 * @since 0.1.0
 * @category constants
 */
export const binaryWalkLimit = 65_536
/**
 * @since 0.1.0
 * @category constants
 */
export const binaryMarker = "[Binary]"
/**
 * @since 0.1.0
 * @category constants
 */
export const functionMarker = "[Function]"
/**
 * @since 0.1.0
 * @category constants
 */
export const symbolMarker = "[Symbol]"
/**
 * @since 0.1.0
 * @category constants
 */
export const depthMarker = "[Deep]"
/**
 * @since 0.1.0
 * @category constants
 */
export const circularMarker = "[Circular]"

const secretName = "(?:key|token|secret|password|credential)"

/**
 * The default textual rules (docs/design/journal.md). Every repetition is bounded or
 * followed by a disjoint class, so matching stays linear on hostile input.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultRules: ReadonlyArray<Rule> = [
  {
    id: "private-key-block",
    pattern: /-----BEGIN [A-Z0-9 ]{0,64}PRIVATE KEY-----[\s\S]{0,16384}?-----END [A-Z0-9 ]{0,64}-----/g
  },
  {
    id: "url-credentials",
    pattern: /\b([A-Za-z][A-Za-z0-9+.-]{0,30}:\/\/)([^\s:@/]{1,256}):[^\s@/]{1,256}@/g,
    replace: "$1$2:[REDACTED]@"
  },
  { id: "bearer-token", pattern: /\bBearer\s{1,16}[A-Za-z0-9._~+/=-]{4,}/gi, replace: "Bearer [REDACTED_TOKEN]" },
  { id: "basic-authorization", pattern: /\bBasic\s{1,16}[A-Za-z0-9+/=]{4,}/g, replace: "Basic [REDACTED_TOKEN]" },
  { id: "jwt", pattern: /eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{1,}\.[A-Za-z0-9_-]{1,}/g, replace: "[REDACTED_TOKEN]" },
  { id: "api-key", pattern: /(?<![A-Za-z0-9])(?:sk|pk)[-_][A-Za-z0-9][A-Za-z0-9_-]{7,}/g, replace: "[REDACTED_API_KEY]" },
  { id: "github-token", pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/g },
  { id: "aws-access-key", pattern: /\bAKIA[0-9A-Z]{16}/g },
  { id: "slack-token", pattern: /\bxox[baprs]-[A-Za-z0-9-]{10,}/g },
  { id: "google-api-key", pattern: /\bAIza[0-9A-Za-z_-]{35,}/g },
  {
    id: "embedded-json-credential",
    pattern: new RegExp(`("[^"\\\\]{0,64}${secretName}[^"\\\\]{0,64}"\\s{0,16}:\\s{0,16})"(?:[^"\\\\]|\\\\.){0,4096}"`, "gi"),
    replace: "$1\"[REDACTED]\""
  },
  {
    id: "assignment",
    pattern: new RegExp(
      `\\b([A-Za-z0-9_.-]{0,64}?${secretName}s?)\\s{0,16}[:=]\\s{0,16}(?:"[^"]{0,4096}"|'[^']{0,4096}'|[^\\s"']{1,4096})`,
      "gi"
    ),
    replace: "$1=[REDACTED]"
  },
  {
    id: "cookie-session-assignment",
    pattern: /\b([A-Za-z0-9_.-]{0,64}?(?:cookie|session)s?)\s{0,16}=\s{0,16}[^;,\s]{1,4096}/gi,
    replace: "$1=[REDACTED]"
  }
]

const sensitiveSuffixes = [
  "auth",
  "authorization",
  "cookie",
  "apikey",
  "token",
  "password",
  "passwd",
  "pwd",
  "passphrase",
  "secret",
  "secretaccesskey",
  "credential",
  "dsn",
  "connection",
  "connectionstring",
  "connectionuri",
  "connectionurl",
  "secretkey",
  "privatekey",
  "sshkey",
  "signingkey",
  "signature",
  "encryptionkey",
  "session",
  "sessionkey"
] as const

const normalize = (key: string): string => key.toLowerCase().replace(/[^a-z0-9]/g, "")

/**
 * Whether a member named `key` holds a secret: its last word (split on
 * non-alphanumerics) is `key` or `pass`, or its lowercased alphanumeric form,
 * minus one trailing `s`, ends with a sensitive suffix (`token`, `password`,
 * `passwd`, `pwd`, `session`, `pass`, …; see docs/design/journal.md).
 * Suffix, not substring: `tokenizer`, `secretary`, `monkey` are not sensitive.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isSensitiveKey = (key: string): boolean => {
  const words = key.split(/[^A-Za-z0-9]+/).filter((word) => word.length > 0)
  const last = words.length > 0 ? words[words.length - 1]!.toLowerCase() : ""
  // `pass` only as a separate word: as a suffix it would catch `bypass`, `compass`.
  if (last === "key" || last === "pass") return true
  let normalized = normalize(key)
  if (normalized.endsWith("s")) normalized = normalized.slice(0, -1)
  return sensitiveSuffixes.some((suffix) => normalized.endsWith(suffix))
}

// Token counts (`inputTokens: 42`, `budget.tokens`) are numbers, not secrets.
const isTokenCount = (key: string, value: unknown): boolean =>
  normalize(key).endsWith("tokens") && typeof value === "number" && Number.isSafeInteger(value) && value >= 0

const applyRules = (text: string, rules: ReadonlyArray<Rule>): string => {
  // Repeat until stable (bounded) so that redaction is a fixed point even when
  // one rule's output exposes another rule's match.
  let current = text
  for (let round = 0; round < 4; round++) {
    let next = current
    for (const rule of rules) {
      rule.pattern.lastIndex = 0
      next = next.replace(rule.pattern, rule.replace ?? placeholder)
    }
    if (next === current) return current
    current = next
  }
  return current
}

const typedArray = Object.getPrototypeOf(Uint8Array) as abstract new(...args: Array<unknown>) => ArrayBufferView

const isBinary = (value: object): boolean =>
  value instanceof typedArray || value instanceof DataView || value instanceof ArrayBuffer ||
  (typeof SharedArrayBuffer !== "undefined" && value instanceof SharedArrayBuffer)

// Containers whose content is not own data properties: returned as they are,
// never walked (the journal's encoder refuses them as non-plain values).
const isOpaque = (value: object): boolean =>
  value instanceof Map || value instanceof Set || value instanceof WeakMap || value instanceof WeakSet ||
  value instanceof Promise || value instanceof RegExp || value instanceof Error

const describeBinary = (value: object): string => {
  let name = "Binary"
  let bytes = "?"
  try {
    name = (value as { constructor?: { name?: unknown } }).constructor?.name as string ?? name
  } catch {
    // a hostile proxy: keep the generic name
  }
  try {
    bytes = String((value as { byteLength: number }).byteLength)
  } catch {
    // a proxy over a view: the byteLength getter refuses a non-view receiver
  }
  return `${typeof name === "string" ? name : "Binary"} ${bytes} bytes`
}

const setMember = (target: Record<string, unknown>, key: string, value: unknown): void => {
  // `__proto__` is data here, never a prototype assignment.
  if (key === "__proto__") Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
  else target[key] = value
}

class TooDeep extends Error {
  constructor() {
    super(`value nested deeper than ${maxDepth} levels`)
    this.name = "RedactionTooDeep"
  }
}

/**
 * Redact `value`: arrays and plain objects are rebuilt (own enumerable keys),
 * `toJSON` runs first (`Date` → ISO string), strings and keys pass the textual
 * rules (a key a rule changes becomes `"[REDACTED]"`), sensitive members become
 * `"[REDACTED]"`; functions, symbols, cycles and binary views become markers.
 * Depth > 256 throws unless `onTooDeep: "name"`.
 *
 * @since 0.1.0
 * @category redaction
 */
export const redact = (value: unknown, options: Options = {}): unknown => {
  const rules = options.rules ?? defaultRules
  const onTooDeep = options.onTooDeep ?? "throw"
  const ancestors = new Set<object>()

  const walk = (current: unknown, depth: number, key: string): unknown => {
    switch (typeof current) {
      case "string":
        return applyRules(current, rules)
      case "function":
        return functionMarker
      case "symbol":
        return symbolMarker
      case "object":
        break
      default:
        return current
    }
    if (current === null) return null
    if (depth > maxDepth) {
      if (onTooDeep === "name") return depthMarker
      throw new TooDeep()
    }
    if (ancestors.has(current)) return circularMarker
    const binary = isBinary(current)
    if (!binary) {
      const toJSON = (current as { toJSON?: unknown }).toJSON
      if (typeof toJSON === "function") {
        return walk((toJSON as (key: string) => unknown).call(current, key), depth, key)
      }
      if (isOpaque(current)) return current
    }
    ancestors.add(current)
    try {
      if (binary) {
        const summary: Record<string, unknown> = { [binaryMarker]: describeBinary(current) }
        let length = 0
        try {
          length = (current as { byteLength?: number }).byteLength ?? 0
        } catch {
          length = binaryWalkLimit + 1
        }
        if (length <= binaryWalkLimit) {
          for (const member of Object.keys(current)) {
            if (/^(0|[1-9][0-9]*)$/.test(member)) continue
            setMember(summary, redactKey(member), redactMember(member, (current as Record<string, unknown>)[member], depth))
          }
        }
        return summary
      }
      if (Array.isArray(current)) {
        return current.map((item, index) => walk(item, depth + 1, String(index)))
      }
      const rebuilt: Record<string, unknown> = {}
      for (const member of Object.keys(current)) {
        setMember(rebuilt, redactKey(member), redactMember(member, (current as Record<string, unknown>)[member], depth))
      }
      return rebuilt
    } finally {
      ancestors.delete(current)
    }
  }

  const redactKey = (member: string): string => (applyRules(member, rules) === member ? member : placeholder)

  const redactMember = (member: string, item: unknown, depth: number): unknown => {
    if (isSensitiveKey(member) && !isTokenCount(member, item)) return placeholder
    return walk(item, depth + 1, member)
  }

  return walk(value, 0, "")
}

/**
 * A redactor with fixed options.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Redactor => (value) => redact(value, options)

/**
 * The identity redactor.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeNoop = (): Redactor => (value) => value

/**
 * Redact a JSON document: unparseable input is returned unchanged; a redactor
 * throw or an encode failure yields the JSON string `"[REDACTED]"`, never the input.
 *
 * @since 0.1.0
 * @category redaction
 */
export const redactJsonString = (json: string, redactor: Redactor): string => {
  let parsed: unknown
  try {
    parsed = JSON.parse(json)
  } catch {
    return json
  }
  try {
    const encoded = JSON.stringify(redactor(parsed))
    return encoded === undefined ? JSON.stringify(placeholder) : encoded
  } catch {
    return JSON.stringify(placeholder)
  }
}
