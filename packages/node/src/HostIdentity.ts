/**
 * Who this process is: a host id that groups processes able to judge each other by pid,
 * the pid, and an incarnation that prefixes every claim nonce. `detect` answers the process's
 * incarnation (minted once per process); every NodeRuntime build mints its own, so two runtimes
 * in one process are two owners.
 *
 * @since 0.1.0
 */
import type * as OwnerId from "@baton/journal/OwnerId"
import { Clock, Effect, Option } from "effect"
import * as crypto from "node:crypto"
import * as os from "node:os"
import * as HostProc from "./internal/hostProc.js"
import { identifierIssue, NodeRuntimeError } from "./internal/runtimeError.js"

/**
 * This process's identity.
 * - `hostId`: `"<hostname>/<boot>[/<pidns>]"`, or the override (`hostId` option, `BATON_HOST_ID`);
 * - `pid`: the process id (tests may override it);
 * - `incarnation`: `"n1-<startTicks|x>-<12 hex>"`: the process's, or one minted for a NodeRuntime build;
 * - `startTicks`: field 22 of `/proc/self/stat` (clock ticks after boot), when readable.
 *
 * @since 0.1.0
 * @category models
 */
export interface HostIdentity {
  readonly hostId: string
  readonly pid: number
  readonly incarnation: string
  readonly startTicks: Option.Option<number>
}

/**
 * Inputs of {@link detectWith}; everything defaults to the real process.
 *
 * @since 0.1.0
 * @category models
 */
export interface DetectOptions {
  readonly hostId?: string
  readonly pid?: number
  /** A directory shaped like `/proc` (tests). */
  readonly procRoot?: string
  readonly hostname?: string
  /** Environment to read `BATON_HOST_ID` from; default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>
  /** Mint a fresh incarnation instead of the process's one (each NodeRuntime build; tests simulating a restart). */
  readonly freshIncarnation?: boolean
}

const mintIncarnation = (startTicks: Option.Option<number>): string =>
  `n1-${Option.match(startTicks, { onNone: () => "x", onSome: String })}-${crypto.randomBytes(6).toString("hex")}`

let processIncarnation: string | undefined

const incarnationOf = (startTicks: Option.Option<number>, fresh: boolean): string => {
  if (fresh) return mintIncarnation(startTicks)
  if (processIncarnation === undefined) processIncarnation = mintIncarnation(startTicks)
  return processIncarnation
}

/** Hostname rule: lower-case, `[a-z0-9.-]` kept, others `-`, empty → `localhost`. */
const normalizeHostname = (name: string): string => {
  const cleaned = name.toLowerCase().replace(/[^a-z0-9.-]/g, "-")
  return cleaned.length === 0 ? "localhost" : cleaned
}

const invalid = (field: string, message: string) =>
  new NodeRuntimeError({ reason: "invalid_options", field, message: `${field}: ${message}` })

/**
 * Detect the identity with explicit inputs (a fake procRoot, a hostname, an environment).
 * Fails `NodeRuntimeError` (`invalid_options`, field `hostId` or `pid`) for an override that
 * breaks the journal's identifier rules or is not a safe integer ≥ 1.
 *
 * @since 0.1.0
 * @category constructors
 */
export const detectWith = (options: DetectOptions = {}): Effect.Effect<HostIdentity, NodeRuntimeError> =>
  Effect.gen(function*() {
    const procRoot = options.procRoot ?? HostProc.defaultProcRoot
    const env = options.env ?? process.env
    const override = options.hostId ?? env["BATON_HOST_ID"]
    if (override !== undefined) {
      const issue = identifierIssue(override)
      if (issue !== undefined) return yield* invalid("hostId", issue)
    }
    const pid = options.pid ?? process.pid
    if (!Number.isSafeInteger(pid) || pid < 1) return yield* invalid("pid", "must be a safe integer >= 1")
    const startTicks = Option.fromNullable(HostProc.stat(procRoot, "self")?.startTicks)
    let hostId = override
    if (hostId === undefined) {
      const boot = HostProc.bootId(procRoot) ?? (yield* bootFromUptime)
      const pidns = HostProc.pidNamespace(procRoot)
      hostId = [normalizeHostname(options.hostname ?? os.hostname()), boot, ...(pidns === undefined ? [] : [pidns])]
        .join("/")
    }
    return { hostId, pid, incarnation: incarnationOf(startTicks, options.freshIncarnation === true), startTicks }
  })

/** Off Linux: the boot instant floored to the minute (best effort: no boot id to read). */
const bootFromUptime = Effect.map(Clock.currentTimeMillis, (nowMs) => {
  const bootSeconds = Math.floor(nowMs / 1000 - os.uptime())
  return `t${bootSeconds - (bootSeconds % 60)}`
})

/**
 * Detect this process's identity; `overrides.hostId` (else env `BATON_HOST_ID`) replaces the
 * host id whole, `overrides.pid` the pid. The incarnation is the process's: the same for every
 * call in one process (a NodeRuntime build mints its own instead).
 *
 * @since 0.1.0
 * @category constructors
 */
export const detect = (
  overrides?: { readonly hostId?: string; readonly pid?: number }
): Effect.Effect<HostIdentity, NodeRuntimeError> => detectWith(overrides ?? {})

/**
 * The runtime owner control writes under: `{ hostId, pid, nonce: incarnation }`. Claims carry
 * their own nonces from {@link mintNonce}.
 *
 * @since 0.1.0
 * @category accessors
 */
export const ownerOf = (identity: HostIdentity): OwnerId.OwnerId => ({
  hostId: identity.hostId,
  pid: identity.pid,
  nonce: identity.incarnation
})

/**
 * Control's nonce minter: each call answers `"<incarnation>.<random UUID>"`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const mintNonce = (identity: HostIdentity) => (): string => `${identity.incarnation}.${crypto.randomUUID()}`

/**
 * Whether `nonce` was minted by this incarnation (it starts with `"<incarnation>."`).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isOwnNonce = (identity: HostIdentity, nonce: string): boolean =>
  nonce.startsWith(`${identity.incarnation}.`)

/**
 * The start ticks a node-minted nonce carries (`n1-<ticks>-…`), if any (the liveness probe compares them to the pid's start ticks).
 *
 * @since 0.1.0
 * @category accessors
 */
export const startTicksOfNonce = (nonce: string): Option.Option<number> => {
  const match = /^n1-(\d+)-[0-9a-f]{12}(?:\.|$)/.exec(nonce)
  const ticks = match?.[1] === undefined ? NaN : Number(match[1])
  return Number.isSafeInteger(ticks) ? Option.some(ticks) : Option.none()
}
