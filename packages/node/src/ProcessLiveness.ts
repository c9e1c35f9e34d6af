/**
 * The process liveness probe: may a stale owner's run be replaced? It decides *whether*,
 * never *when* (the run store still refuses while the lease is fresh). Aware of hosts, pid
 * namespaces (through the host id), pid reuse and a restarted process with the same pid.
 *
 * @since 0.1.0
 */
import * as Consensus from "@baton/journal/Consensus"
import type * as OwnerId from "@baton/journal/OwnerId"
import type * as Ownership from "@baton/run-store/Ownership"
import { Duration, Effect, Option } from "effect"
import * as HostIdentity from "./HostIdentity.js"
import * as HostProc from "./internal/hostProc.js"
import * as LiveIncarnations from "./internal/liveIncarnations.js"

/**
 * Why the probe answered as it did; one per rule of the probe.
 *
 * @since 0.1.0
 * @category models
 */
export type Reason =
  | "other-host-lease-fresh"
  | "other-host-lease-expired"
  | "this-process"
  | "previous-incarnation"
  | "pid-invalid"
  | "pid-gone"
  | "pid-unknown"
  | "pid-zombie"
  | "pid-matches"
  | "pid-reused"
  | "pid-started-before-heartbeat"

/**
 * A probe answer for logs and `baton doctor`: `alive` (do not replace), the rule's `reason`
 * and a one-line `detail`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Verdict {
  readonly alive: boolean
  readonly reason: Reason
  readonly detail: string
}

/**
 * Options of {@link makeWith}.
 * - `procRoot`: a directory shaped like `/proc` (default `/proc`);
 * - `identity`: this process (default: detected over `procRoot`);
 * - `takeOverHungOwnersAfter`: opt-in (≥ 2 × stale-after, validated by NodeRuntime); once a
 *   same-host owner's lease is that old, its "alive" answers (`pid-invalid`, `pid-unknown`, `pid-matches`,
 *   `pid-started-before-heartbeat`) become dead;
 * - `kill`: the signal-0 probe (default `process.kill`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly procRoot?: string
  readonly identity?: HostIdentity.HostIdentity
  readonly takeOverHungOwnersAfter?: Duration.DurationInput
  readonly kill?: (pid: number, signal: 0) => void
}

/**
 * A probe and the run-store liveness check over it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Probe {
  readonly probe: (owner: OwnerId.OwnerId, context: Ownership.LivenessContext) => Effect.Effect<Verdict>
  readonly check: Ownership.LivenessCheck
}

const verdict = (alive: boolean, reason: Reason, detail: string): Verdict => ({ alive, reason, detail })

const errnoOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error ? String(error.code) : undefined

/** The rules for an owner on this host with another pid: pid validity, signal 0, `/proc` state, start time. */
const sameHostVerdict = (
  owner: OwnerId.OwnerId,
  context: Ownership.LivenessContext,
  procRoot: string,
  kill: (pid: number, signal: 0) => void
): Verdict => {
  const pid = owner.pid
  if (!Number.isSafeInteger(pid) || pid < 1) return verdict(true, "pid-invalid", `pid ${pid} is not a valid pid`)
  let killError: string | undefined
  try {
    kill(pid, 0)
  } catch (error) {
    const code = errnoOf(error)
    if (code === "ESRCH") return verdict(false, "pid-gone", `no process ${pid}`)
    // EPERM: the pid exists under another user.
    if (code !== "EPERM") killError = code ?? "unknown error"
  }
  const stat = HostProc.stat(procRoot, pid)
  if (killError !== undefined || stat === undefined) {
    return verdict(
      true,
      "pid-unknown",
      killError !== undefined ? `probing pid ${pid} failed (${killError})` : `cannot read the stat of pid ${pid}`
    )
  }
  if (stat.state === "Z" || stat.state === "X") return verdict(false, "pid-zombie", `pid ${pid} is a zombie`)
  const minted = HostIdentity.startTicksOfNonce(owner.nonce)
  if (Option.isSome(minted)) {
    return stat.startTicks === minted.value
      ? verdict(true, "pid-matches", `pid ${pid} started at tick ${stat.startTicks}, as its nonce says`)
      : verdict(false, "pid-reused", `pid ${pid} started at tick ${stat.startTicks}; the owner at ${minted.value}`)
  }
  const btime = HostProc.bootTimeSeconds(procRoot)
  if (btime === undefined) return verdict(true, "pid-unknown", `cannot read the boot time for pid ${pid}`)
  const startedAtMs = btime * 1000 + stat.startTicks * 10
  if (context.heartbeatAtMs === null || startedAtMs <= context.heartbeatAtMs + 1000) {
    return verdict(true, "pid-started-before-heartbeat", `pid ${pid} started at ${startedAtMs} ms`)
  }
  return verdict(false, "pid-reused", `pid ${pid} started at ${startedAtMs} ms, after the lease stamp`)
}

/**
 * Build a probe over `options.procRoot`. The probe never fails; unexpected errors answer
 * `pid-unknown` (alive).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeWith = (options: Options = {}): Probe => {
  const procRoot = options.procRoot ?? HostProc.defaultProcRoot
  const kill = options.kill ?? ((pid: number, signal: 0) => void process.kill(pid, signal))
  const hungAfterMs = options.takeOverHungOwnersAfter === undefined
    ? undefined
    : Duration.toMillis(Duration.decode(options.takeOverHungOwnersAfter))
  const staleAfterMs = Duration.toMillis(Consensus.heartbeatStaleAfter)
  const identity: Effect.Effect<HostIdentity.HostIdentity> = options.identity !== undefined
    ? Effect.succeed(options.identity)
    : HostIdentity.detectWith({ procRoot }).pipe(
      Effect.orElse(() => HostIdentity.detectWith({ procRoot, env: {} })),
      Effect.orDie
    )
  const probe = (owner: OwnerId.OwnerId, context: Ownership.LivenessContext): Effect.Effect<Verdict> =>
    Effect.map(identity, (self) => {
      const hb = context.heartbeatAtMs
      if (owner.hostId !== self.hostId) {
        return hb !== null && hb >= context.nowMs - staleAfterMs
          ? verdict(true, "other-host-lease-fresh", `owner on ${owner.hostId}; lease ${context.nowMs - hb} ms old`)
          : verdict(false, "other-host-lease-expired", `owner on ${owner.hostId}; lease expired`)
      }
      if (owner.pid === self.pid) {
        if (HostIdentity.isOwnNonce(self, owner.nonce)) return verdict(true, "this-process", `pid ${owner.pid} is this process`)
        // Another NodeRuntime running in this process has its own incarnation; it is alive.
        if (LiveIncarnations.isLiveHere(owner.nonce)) {
          return verdict(true, "this-process", `pid ${owner.pid} is this process (another runtime in it)`)
        }
        return verdict(false, "previous-incarnation", `pid ${owner.pid} was an earlier process with this host id`)
      }
      let answer: Verdict
      try {
        answer = sameHostVerdict(owner, context, procRoot, kill)
      } catch (error) {
        answer = verdict(true, "pid-unknown", `probing pid ${owner.pid} failed: ${String(error)}`)
      }
      if (answer.alive && hungAfterMs !== undefined && hb !== null && context.nowMs - hb >= hungAfterMs) {
        return verdict(false, answer.reason, `${answer.detail}; hung: lease ${context.nowMs - hb} ms old`)
      }
      return answer
    })
  return { probe, check: (owner, context) => Effect.map(probe(owner, context), (v) => v.alive) }
}

const defaultProbe = makeWith()

/**
 * The probe of this process over `/proc`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const probe: (owner: OwnerId.OwnerId, context: Ownership.LivenessContext) => Effect.Effect<Verdict> =
  defaultProbe.probe

/**
 * The run-store `LivenessCheck` of this process: `true` = alive, do not replace.
 *
 * @since 0.1.0
 * @category constructors
 */
export const check: Ownership.LivenessCheck = defaultProbe.check
