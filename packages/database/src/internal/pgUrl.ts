/**
 * PostgreSQL URL admission for `PgDatabase`: scheme check, password redaction,
 * the parts a `connect_failed` message names, and schema-name validation.
 *
 * @internal
 */

/** A parsed, admitted PostgreSQL URL. */
export interface PgTarget {
  /** The URL to hand to node-postgres (a secret: may contain the password). */
  readonly connectionString: string
  /** The URL with the password replaced by `***` (safe to print). */
  readonly redacted: string
  readonly host: string
  readonly port: number
  readonly database: string
  /** The `options` startup parameter the URL itself carried, if any. */
  readonly startupOptions: string | undefined
}

/** Why a URL was refused, with its user-facing message (never the password). */
export interface UrlRefusal {
  readonly reason: "wrong_dialect" | "invalid_url"
  readonly target: string
  readonly message: string
}

const schemeOf = (input: string): string | undefined => /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(input)?.[1]

/**
 * Render a URL for humans: the password (userinfo or a `password` query
 * parameter) becomes `***`; nothing else of the input is hidden.
 */
export const redactUrl = (url: URL): string => {
  const copy = new URL(url.href)
  if (copy.password !== "") copy.password = "***"
  if (copy.searchParams.has("password")) copy.searchParams.set("password", "***")
  // URL serialization percent-encodes "*"; show the marker literally.
  return copy.href.replace(/%2A%2A%2A/gi, "***")
}

const redactAny = (input: string, scheme: string): string => {
  try {
    return redactUrl(new URL(input))
  } catch {
    return `${scheme}://…`
  }
}

const wrongDialect = (target: string, scheme: string | undefined): UrlRefusal => ({
  reason: "wrong_dialect",
  target,
  message: `PgDatabase needs a postgres:// or postgresql:// URL, got ${
    scheme === undefined ? "a file path (use SqliteDatabase.layer)" : `a ${scheme}:// URL`
  }`
})

const malformed = (scheme: string): UrlRefusal => ({
  reason: "invalid_url",
  target: `${scheme}://…`,
  message: "the PostgreSQL URL is malformed"
})

/**
 * Admit `input` as a PostgreSQL URL. Other schemes and plain paths are
 * `wrong_dialect`; an unparsable URL is `invalid_url` and is never echoed.
 */
export const parsePgUrl = (input: string): PgTarget | UrlRefusal => {
  const scheme = schemeOf(input)
  if (scheme === undefined) {
    // "postgres:…" without "//" is a mistyped URL, not a path.
    if (/^postgres(ql)?:/i.test(input)) return malformed("postgres")
    return wrongDialect(input, undefined)
  }
  const lower = scheme.toLowerCase()
  if (lower !== "postgres" && lower !== "postgresql") return wrongDialect(redactAny(input, lower), lower)
  let url: URL
  try {
    url = new URL(input)
  } catch {
    return malformed(lower)
  }
  const startupOptions = url.searchParams.get("options") ?? undefined
  const forDriver = new URL(url.href)
  forDriver.searchParams.delete("options")
  let user = ""
  try {
    user = decodeURIComponent(url.username)
  } catch {
    return malformed(lower)
  }
  const host = url.hostname.replace(/^\[(.+)\]$/, "$1") || url.searchParams.get("host") || "localhost"
  const port = url.port === "" ? Number(url.searchParams.get("port") ?? 5432) : Number(url.port)
  const pathname = url.pathname.slice(1)
  let database = pathname
  try {
    database = decodeURIComponent(pathname)
  } catch {
    // keep the raw path segment; it is only used in messages
  }
  return {
    connectionString: forDriver.href,
    redacted: redactUrl(url),
    host,
    port: Number.isSafeInteger(port) ? port : 5432,
    database: database === "" ? (user === "" ? "postgres" : user) : database,
    startupOptions
  }
}

/** Whether `parsePgUrl` refused its input. */
export const isRefusal = (value: PgTarget | UrlRefusal): value is UrlRefusal => "reason" in value

/** Schema names Baton accepts: lowercase identifiers that never need quoting. */
export const schemaPattern = /^[a-z_][a-z0-9_]{0,62}$/

/** The `invalid_schema` message. */
export const invalidSchemaMessage = (schema: string): string =>
  `PostgreSQL schema "${schema}" is invalid: use 1-63 lowercase letters, digits or "_", starting with a letter or "_"`
