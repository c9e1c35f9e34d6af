/**
 * Which live hosts serve which flows with which code, as `baton doctor` can tell from what control keeps.
 * First the hosts' presence rows (`HostPresence`): each running host lists the flows it serves and their
 * code, refreshed while it runs, so an idle host is seen too. Then, as a fallback for hosts that keep no
 * row (an older build, or a database without the presence table), the runs they hold: a run whose owner's
 * lease is fresh is driven by a live host, and a parked run whose parking process the probe finds alive was
 * parked by one; either way that host serves the run's flow with the run's recorded code (a host drives
 * only runs whose recorded code is its own, or adopts them into it).
 */
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as HostPresence from "@baton/control/HostPresence"
import type * as ControlSchema from "@baton/control/ControlSchema"
import type * as OwnerId from "@baton/journal/OwnerId"
import * as RunStore from "@baton/run-store/RunStore"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ProcessLiveness from "../ProcessLiveness.js"
import { hostPid, parseOwner, staleAfterMs } from "./cliRender.js"

/**
 * One live host serving a flow: `host:pid`, the code it runs the flow with, and how it was seen (its
 * presence row lists the flow, or it drives or has parked a run of it).
 */
export interface Server {
  readonly host: string
  readonly code: string | undefined
  readonly seen: "listed" | "drives" | "parked"
}

/** Live servers by flow id. */
export type Services = ReadonlyMap<string, ReadonlyArray<Server>>

/** Every run of `status` (pages of 500, at most `maxPages`); a listing that fails answers what it read. */
const runsOf = (status: ControlSchema.RunStatus, maxPages = 20) =>
  Effect.gen(function*() {
    const runtime = yield* ControlRuntime.ControlRuntime
    const items: Array<ControlSchema.RunSummary> = []
    let cursor: ControlRuntime.RunCursor | undefined
    for (let page = 0; page < maxPages; page++) {
      const read = yield* runtime.queryRuns({ filters: { status }, limit: 500, ...(cursor === undefined ? {} : { cursor }) }).pipe(Effect.either)
      if (read._tag === "Left") break
      items.push(...read.right.items)
      cursor = read.right.nextCursor
      if (cursor === undefined) break
    }
    return items
  })

// A probe that could not look counts as not seen: doctor names only hosts it has evidence for.
const provenAlive = (verdict: ProcessLiveness.Verdict) => verdict.alive && verdict.reason !== "pid-unknown"

/** The live servers of every flow the presence rows and control's runs show, as of `nowMs`; `observer` is this process. */
export const liveServices = (nowMs: number, observer: OwnerId.OwnerId) =>
  Effect.gen(function*() {
    const store = yield* RunStore.RunStore
    const services = new Map<string, Array<Server>>()
    const add = (flowId: string, server: Server) => {
      const list = services.get(flowId) ?? []
      if (!list.some((s) => s.host === server.host && s.code === server.code)) list.push(server)
      services.set(flowId, list)
    }
    // A read only; without the table (or when it cannot be read) the runs below are the only evidence.
    const presence = yield* HostPresence.live(nowMs).pipe(Effect.orElseSucceed(() => Option.none()))
    const listed = new Set<string>()
    for (const host of Option.getOrElse(presence, () => [])) {
      listed.add(hostPid(host))
      for (const flow of host.flows) add(flow.flowId, { host: hostPid(host), code: flow.version, seen: "listed" })
    }
    // A host that lists its flows is judged by its list alone: its row names the code it runs now.
    for (const run of yield* runsOf("running")) {
      const row = yield* store.get(run.runId).pipe(Effect.option)
      if (row._tag === "None" || row.value.owner === null || row.value.heartbeatAtMs === null) continue
      if (nowMs - row.value.heartbeatAtMs > staleAfterMs) continue
      const server: Server = { host: hostPid(row.value.owner), code: run.executionDigest, seen: "drives" }
      if (!listed.has(server.host)) add(run.flowId, server)
    }
    for (const status of ["parked", "waiting-approval"] as const) {
      for (const run of yield* runsOf(status)) {
        const parker = parseOwner(run.parkedBy)
        if (parker?.nonce === undefined || listed.has(hostPid(parker))) continue
        const owner = { hostId: parker.hostId, pid: parker.pid, nonce: parker.nonce } as OwnerId.OwnerId
        const verdict = yield* ProcessLiveness.probe(owner, { claimant: observer, heartbeatAtMs: null, nowMs })
        if (provenAlive(verdict)) add(run.flowId, { host: hostPid(parker), code: run.executionDigest, seen: "parked" })
      }
    }
    return services as Services
  })

/** How a run waiting for a host stands against the live servers of its flow. */
export type Standing =
  | { readonly _tag: "Unserved" }
  | { readonly _tag: "Drifted"; readonly servers: ReadonlyArray<Server> }
  | { readonly _tag: "Served"; readonly servers: ReadonlyArray<Server> }

/**
 * `Unserved` when no live host serves `flowId`; `Drifted` when every live host serving it runs other code
 * than the run recorded (each skips the run); else `Served` by those that run the run's code.
 */
export const standing = (services: Services, flowId: string, recorded: string | undefined): Standing => {
  const servers = services.get(flowId) ?? []
  if (servers.length === 0) return { _tag: "Unserved" }
  const same = servers.filter((s) => s.code === recorded)
  return same.length === 0 ? { _tag: "Drifted", servers } : { _tag: "Served", servers: same }
}

/** `host:pid (code 2)` for each server, for messages. */
export const describeServers = (servers: ReadonlyArray<Server>): string =>
  servers.map((s) => `${s.host} (code ${s.code ?? "?"})`).join(", ")
