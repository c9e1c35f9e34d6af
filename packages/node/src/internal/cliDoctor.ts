/**
 * `baton doctor`: file, ledger, schema, stuck runs, orphaned claims and backlog checks,
 * each OK, WARN or FAIL, through the packages' public reads only (plus SQLite pragmas about the file).
 */
import * as Migrations from "@baton/database/Migrations"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as Queues from "@baton/control/Queues"
import * as Journal from "@baton/journal/Journal"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as Ownership from "@baton/run-store/Ownership"
import * as RunStore from "@baton/run-store/RunStore"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as HostIdentity from "../HostIdentity.js"
import * as NodeRuntime from "../NodeRuntime.js"
import * as ProcessLiveness from "../ProcessLiveness.js"
import { databaseCode } from "./cliFailure.js"
import * as Hosts from "./cliHosts.js"
import { hostPid } from "./cliRender.js"
import * as Verbs from "./cliVerbs.js"
import type { Catalog, Globals } from "./cliSession.js"
import { librarySets, location, pendingText } from "./cliSession.js"

/** One check's verdict. */
export interface Finding {
  readonly check: string
  readonly level: "OK" | "WARN" | "FAIL"
  readonly message: string
  readonly hint?: string | undefined
}

const staleAfterMs = 30_000

const ok = (check: string, message: string): Finding => ({ check, level: "OK", message })
const warn = (check: string, message: string, hint?: string): Finding => ({ check, level: "WARN", message, hint })
const fail = (check: string, message: string, hint?: string): Finding => ({ check, level: "FAIL", message, hint })

const schemaProbe = <A, E, R>(call: string, effect: Effect.Effect<A, E, R>): Effect.Effect<Finding | undefined, never, R> =>
  effect.pipe(
    Effect.as(undefined),
    Effect.catchAll((error) =>
      Effect.succeed(
        databaseCode(error) === "schema" || /no such table|no such column|does not exist/i.test(String((error as { message?: unknown })?.message ?? ""))
          ? fail("schema", `${call} fails: a table or column is missing (${String((error as { message?: unknown })?.message ?? error)})`, "restore the database from a backup, or start over with a new file")
          : undefined
      )
    ),
    Effect.catchAllDefect((defect) => Effect.succeed(fail("schema", `${call} fails: ${String(defect)}`)))
  )

/** The runs control's listing flags unreadable (`readable: false`): none in the common case, one pass. */
const unreadableRuns = Effect.gen(function*() {
  const runtime = yield* ControlRuntime.ControlRuntime
  const found: Array<Verbs.UnreadableRun> = []
  let cursor: ControlRuntime.RunCursor | undefined
  for (;;) {
    const page = yield* runtime.queryRuns({ limit: 500, ...(cursor === undefined ? {} : { cursor }) }).pipe(Effect.either)
    if (page._tag === "Left") return found
    for (const item of page.right.items) if (item.readable === false) found.push(yield* Verbs.unreadableOf(item))
    if (page.right.nextCursor === undefined) return found
    cursor = page.right.nextCursor
  }
})

/** The plans control's listing flags unreadable: none in the common case, one pass. */
const unreadablePlans = Effect.gen(function*() {
  const runtime = yield* ControlRuntime.ControlRuntime
  const found: Array<{ readonly planId: string; readonly issue: string }> = []
  let after: number | undefined
  for (;;) {
    const page = yield* runtime.queryPlans({ limit: 500, ...(after === undefined ? {} : { after }) }).pipe(Effect.either)
    if (page._tag === "Left") return found
    found.push(...Verbs.unreadablePlansOf(page.right.plans))
    if (page.right.next === undefined) return found
    after = page.right.next
  }
})

/** What the run's flow no live host serves means, for messages. */
const unservedText = (flowId: string): string =>
  `no live host serves flow ${flowId} (none lists it, drives or has parked a run of it)`

/** The runs of one flow that wait for a host, in claim order. */
interface Waiting {
  readonly runIds: Array<string>
  oldestAgeS: number
  readonly servers: string
}

/** How many candidates doctor reads (lapsed leases first, then released runs in claim order). */
const candidateLimit = 500

const noteWaiting = (into: Map<string, Waiting>, flowId: string, runId: string, ageS: number, servers = "") => {
  const known = into.get(flowId)
  if (known === undefined) into.set(flowId, { runIds: [runId], oldestAgeS: ageS, servers })
  else {
    known.runIds.push(runId)
    known.oldestAgeS = Math.max(known.oldestAgeS, ageS)
  }
}

/** "3 runs (run-1, run-2, run-3)", at most three named; "500 or more" when doctor read its whole limit. */
const manyRuns = (w: Waiting, read: number, limit: number): string => {
  const named = w.runIds.slice(0, 3).join(", ") + (w.runIds.length > 3 ? ", …" : "")
  return `${w.runIds.length}${read >= limit ? " or more" : ""} runs (${named})`
}

/** A run's recorded code against live hosts that run other code for its flow. */
const liveDriftText = (flowId: string, recorded: string | undefined, servers: ReadonlyArray<Hosts.Server>): string =>
  `code drift: it recorded ${recorded ?? "?"}, and the live hosts serving flow ${flowId} run other code (${
    Hosts.describeServers(servers)
  }), so they skip it instead of taking it over`

const liveDriftHint = (runId: string, servers: ReadonlyArray<Hosts.Server>): string =>
  `baton resume ${runId} --allow-code-drift --config <the catalog of ${servers[0]?.host ?? "that host"}>`

/** The code a run recorded (`executionDigest`), or `undefined` when unreadable or not recorded. */
const recordedCode = (runId: string) =>
  Effect.flatMap(ControlRuntime.ControlRuntime, (runtime) => runtime.getRun(runId)).pipe(
    Effect.map((summary): string | undefined => summary.executionDigest),
    Effect.orElseSucceed(() => undefined)
  )

/** Runs every check; with `fix`, recovers orphaned claims whose claimant is dead. */
export const doctor = (globals: Globals, catalog: Catalog | undefined, fix: boolean) =>
  Effect.gen(function*() {
    const findings: Array<Finding> = []
    const sql = yield* SqlClient.SqlClient
    const runtime = yield* ControlRuntime.ControlRuntime
    const store = yield* RunStore.RunStore
    const attempts = yield* AttemptStore.AttemptStore
    const journal = yield* Journal.Journal
    const host = yield* NodeRuntime.NodeHost
    const nowMs = yield* Clock.currentTimeMillis
    // The live hosts the stuck-runs check found, reused by the backlog check.
    let servicesSeen: Hosts.Services | undefined

    // file
    if (globals.pg === undefined) {
      const path = location(globals)
      const problems: Array<string> = []
      const mode = fs.statSync(path).mode & 0o777
      if ((mode & 0o077) !== 0) problems.push(`permissions ${mode.toString(8)} are wider than owner-only (the file holds unredacted inputs)`)
      const journalMode = yield* sql.unsafe<{ journal_mode: string }>("PRAGMA journal_mode").pipe(Effect.orElseSucceed(() => []))
      const modeName = String(journalMode[0]?.journal_mode ?? "unknown").toLowerCase()
      if (modeName !== "wal") problems.push(`journal mode is ${modeName}, not wal`)
      const quick = yield* sql.unsafe<Record<string, unknown>>("PRAGMA quick_check").pipe(Effect.either)
      const quickText = quick._tag === "Right" ? String(Object.values(quick.right[0] ?? {})[0] ?? "ok") : String(quick.left)
      if (quickText !== "ok") findings.push(fail("file", `${path} is damaged: ${quickText}`, "restore it from a backup"))
      else findings.push(problems.length === 0 ? ok("file", `${path} is a healthy SQLite file in WAL mode`) : warn("file", problems.join("; "), `chmod 600 ${path}`))
    } else {
      findings.push(ok("connection", `connected to ${location(globals)}`))
    }

    // ledger
    const status = yield* Migrations.status([...librarySets, ...(catalog?.migrations ?? [])]).pipe(Effect.either)
    if (status._tag === "Left") {
      findings.push(fail("ledger", String((status.left as { message?: unknown }).message ?? status.left)))
    } else if (status.right.pending.length > 0) {
      findings.push(warn("ledger", `the database ${pendingText(status.right)}`, "any mutating command or a host start applies them"))
    } else if (status.right.foreign.length > 0) {
      const blocks = [...new Set(status.right.foreign.map((m) => m.namespace))]
      // The catalog's sets were already narrowed to blocks this database has (cliSession.applicableSets), so
      // a foreign block is one the given --config does not claim, or any block when none was given.
      findings.push(warn(
        "ledger",
        `${status.right.applied.length} migrations applied; foreign blocks: ${blocks.join(", ")}${catalog === undefined ? "" : " (not in the loaded catalog)"}`,
        catalog === undefined ? "pass --config to check the application's migrations" : "pass that application's --config to check its migrations"
      ))
    } else {
      findings.push(ok("ledger", `${status.right.applied.length} migrations applied, none pending`))
    }

    // schema
    const probes = yield* Effect.all([
      schemaProbe("RunStore.get", store.get("baton-doctor-probe")),
      schemaProbe("AttemptStore.list", attempts.list("baton-doctor-probe")),
      schemaProbe("Journal.entries", journal.entries({ runId: "baton-doctor-probe", limit: 1 })),
      schemaProbe("ControlRuntime.pageRunIds", runtime.pageRunIds({ limit: 1 })),
      schemaProbe("ControlRuntime.pagePlanIds", runtime.pagePlanIds({ limit: 1 })),
      schemaProbe("ControlRuntime.pendingResumes", runtime.pendingResumes),
      schemaProbe("ControlRuntime.signalCommands", runtime.signalCommands({ limit: 1 }))
    ])
    const schemaFailures = probes.filter((f): f is Finding => f !== undefined)
    if (globals.pg === undefined) {
      const fk = yield* sql.unsafe<Record<string, unknown>>("PRAGMA foreign_key_check").pipe(Effect.orElseSucceed(() => []))
      if (fk.length > 0) schemaFailures.push(fail("schema", `PRAGMA foreign_key_check lists ${fk.length} rows`))
    }
    // Every run row through control's listing: a row it cannot read is listed flagged (and shown apart by
    // `baton runs`), so such a row is named here.
    const unreadable = schemaFailures.length === 0 ? yield* unreadableRuns : []
    const unreadablePlanRows = schemaFailures.length === 0 ? yield* unreadablePlans : []
    findings.push(
      ...(schemaFailures.length > 0
        ? schemaFailures
        : unreadable.length > 0 || unreadablePlanRows.length > 0
        ? [
          ...(unreadable.length > 0
            ? [warn(
              "schema",
              `${unreadable.length} run(s) cannot be read as runs: ${unreadable.slice(0, 5).map((u) => `${u.runId} (${u.storedStatus ?? "?"}: ${u.issue})`).join("; ")}${
                unreadable.length > 5 ? "; …" : ""
              }`,
              `baton runs lists them marked unreadable; these rows were not written through @baton/control (restore them from a backup or leave them)`
            )]
            : []),
          ...(unreadablePlanRows.length > 0
            ? [warn(
              "schema",
              `${unreadablePlanRows.length} plan(s) cannot be read: ${unreadablePlanRows.slice(0, 5).map((u) => `${u.planId} (${u.issue})`).join("; ")}${
                unreadablePlanRows.length > 5 ? "; …" : ""
              }`,
              `baton plans lists them marked unreadable; these rows were not written through @baton/control (restore them from a backup or leave them)`
            )]
            : [])
        ]
        : [ok("schema", "every public read works")])
    )

    // stuck runs and orphaned claims
    const page = yield* runtime.hostCandidates({ nowMs, limit: candidateLimit }).pipe(Effect.either)
    if (page._tag === "Left") {
      findings.push(fail("stuck runs", `ControlRuntime.hostCandidates fails: ${String((page.left as { message?: unknown }).message ?? page.left)}`))
    } else {
      const stuck: Array<Finding> = []
      const orphans: Array<Finding> = []
      const unserved = new Map<string, Waiting>()
      const unclaimed = new Map<string, Waiting>()
      const services = yield* Hosts.liveServices(nowMs, HostIdentity.ownerOf(host.identity))
      servicesSeen = services
      // Drift is known only for flows the loaded catalog has (a flow it lacks is unknown code, not drift).
      // A host skips a drifted run instead of taking it over, so no takeover is promised for one.
      const known = new Set((catalog?.flows ?? []).map((f) => f.id))
      const drifts = new Map<string, { readonly recorded?: string | undefined; readonly current?: string | undefined; readonly recordedEngine?: string | undefined; readonly currentEngine?: string | undefined }>()
      for (const c of page.right.candidates) {
        if (!known.has(c.flowId)) continue
        const drift = yield* runtime.codeDrift(c.runId).pipe(Effect.orElseSucceed(() => undefined))
        if (drift !== undefined) drifts.set(c.runId, drift)
      }
      for (const c of page.right.candidates) {
        const drift = drifts.get(c.runId)
        const drifted = (situation: string) => {
          const recorded = drift?.recorded ?? drift?.recordedEngine ?? "?"
          const current = drift?.current ?? drift?.currentEngine ?? "nothing"
          return warn(
            "stuck runs",
            `${c.runId} (${c.flowId}): ${situation}; code drift: it recorded ${recorded}, this catalog has ${current}, so hosts with this code skip it instead of taking it over`,
            `baton resume ${c.runId} --allow-code-drift`
          )
        }
        if (c.kind === "stale-owner" && c.owner !== undefined) {
          const ageS = Math.round((nowMs - (c.heartbeatAtMs ?? c.updatedAt)) / 1000)
          const verdict = yield* ProcessLiveness.probe(c.owner, {
            claimant: HostIdentity.ownerOf(host.identity),
            heartbeatAtMs: c.heartbeatAtMs ?? null,
            nowMs
          })
          if (c.owner.hostId === host.identity.hostId && verdict.alive) {
            stuck.push(fail(
              "stuck runs",
              `${c.runId}: owner pid ${c.owner.pid} is alive but not heartbeating (lease ${ageS} s old; ${verdict.reason})`,
              `kill ${c.owner.pid}, or start hosts with takeOverHungOwnersAfter`
            ))
          } else if (drift !== undefined) {
            stuck.push(drifted(`owner ${hostPid(c.owner)} stopped heartbeating ${ageS} s ago (${verdict.reason})`))
          } else {
            // Without this flow in the catalog the CLI cannot see drift; a host whose code changed skips the run.
            stuck.push(warn(
              "stuck runs",
              `${c.runId}: owner ${hostPid(c.owner)} stopped heartbeating ${ageS} s ago (${verdict.reason}); a host will take it over${
                known.has(c.flowId) ? "" : " unless its code for flow " + c.flowId + " changed (then it logs skipped-drift)"
              }`,
              known.has(c.flowId) ? undefined : `if no host takes it over: baton resume ${c.runId} --allow-code-drift --config <the flow's catalog>`
            ))
          }
        } else if (c.kind === "released" && drift !== undefined) {
          stuck.push(drifted(`waits for a host since ${Math.round((nowMs - c.updatedAt) / 1000)} s`))
        } else if (c.kind === "released") {
          // No live host for the flow, or only hosts with other code, is a problem at once; the age rule
          // is for a run that a live host with its code serves but has not picked up.
          const recorded = yield* recordedCode(c.runId)
          const ageS = Math.round((nowMs - c.updatedAt) / 1000)
          const verdict = Hosts.standing(services, c.flowId, recorded)
          if (verdict._tag === "Unserved") {
            noteWaiting(unserved, c.flowId, c.runId, ageS)
          } else if (verdict._tag === "Drifted") {
            stuck.push(warn(
              "stuck runs",
              `${c.runId} (${c.flowId}): waits for a host since ${ageS} s; ${liveDriftText(c.flowId, recorded, verdict.servers)}`,
              liveDriftHint(c.runId, verdict.servers)
            ))
          } else if (nowMs - c.updatedAt > 60_000) {
            noteWaiting(unclaimed, c.flowId, c.runId, ageS, Hosts.describeServers(verdict.servers))
          }
        } else if (c.kind === "orphaned-claim" && c.claim !== undefined) {
          const claim = c.claim
          const claimedAtMs = c.claimedAtMs ?? 0
          // The same probe with or without --fix, so the hint never offers a fix that --fix then declines.
          const observer = HostIdentity.ownerOf(host.identity)
          const verdict = yield* ProcessLiveness.probe(claim, { claimant: observer, heartbeatAtMs: claimedAtMs, nowMs })
          const age = Math.round((nowMs - claimedAtMs) / 1000)
          if (verdict.alive) {
            orphans.push(warn(
              "orphaned claims",
              `${c.runId}: orphaned claim by ${hostPid(claim)} since ${age} s; the claimant is still alive (${verdict.reason}), so ${
                fix ? "it was left alone" : "--fix leaves it alone"
              }`
            ))
          } else if (fix) {
            const outcome = yield* store.recoverClaim(c.runId, claim, claimedAtMs, observer, nowMs, Ownership.evidenceFor(claim, observer, nowMs))
            orphans.push(
              outcome._tag === "Recovered"
                ? ok("orphaned claims", `${c.runId}: recovered the orphaned claim of ${hostPid(claim)}`)
                : warn("orphaned claims", `${c.runId}: not recovered (${outcome._tag})`)
            )
          } else {
            orphans.push(warn("orphaned claims", `${c.runId}: orphaned claim by ${hostPid(claim)} since ${age} s; the claimant is gone (${verdict.reason})`, "baton doctor --fix"))
          }
        }
      }
      // One finding per flow, not per run: a backlog of a thousand runs is one problem with one fix.
      for (const [flowId, w] of unserved) {
        stuck.push(warn(
          "stuck runs",
          w.runIds.length === 1
            ? `${w.runIds[0]} (${flowId}) waits for a host: ${unservedText(flowId)}`
            : `${manyRuns(w, page.right.candidates.length, candidateLimit)} of flow ${flowId} wait for a host: ${unservedText(flowId)}`,
          `start a host that serves flow ${flowId}`
        ))
      }
      for (const [flowId, w] of unclaimed) {
        stuck.push(warn(
          "stuck runs",
          w.runIds.length === 1
            ? `${w.runIds[0]} (${flowId}) waits for a host since ${w.oldestAgeS} s, although ${w.servers} serves flow ${flowId} with its code`
            : `${manyRuns(w, page.right.candidates.length, candidateLimit)} of flow ${flowId} wait for a host (the oldest since ${w.oldestAgeS} s), although ${w.servers} serves flow ${flowId} with its code`,
          "is that host at capacity or stopping? its log says why it does not take the run"
        ))
      }
      findings.push(...(stuck.length === 0 ? [ok("stuck runs", "no stale owners or unserved runs")] : stuck))
      findings.push(...(orphans.length === 0 ? [ok("orphaned claims", "none")] : orphans))
    }

    // backlog: resumes and signals waiting for a host, judged against the live hosts of their flows
    const backlog: Array<Finding> = []
    const services = servicesSeen ?? (yield* Hosts.liveServices(nowMs, HostIdentity.ownerOf(host.identity)))
    const resumes = yield* runtime.pendingResumes.pipe(Effect.orElseSucceed(() => []))
    const waiting = (what: string, items: ReadonlyArray<{ readonly runId: string; readonly requestedAtMs?: number }>) =>
      Effect.gen(function*() {
        const unserved: Array<{ readonly runId: string; readonly flowId: string }> = []
        const late: Array<{ readonly runId: string; readonly servers: ReadonlyArray<Hosts.Server> }> = []
        for (const item of items) {
          const summary = yield* runtime.getRun(item.runId).pipe(Effect.option)
          if (summary._tag === "None") continue
          const { flowId, executionDigest: recorded } = summary.value
          const verdict = Hosts.standing(services, flowId, recorded)
          if (verdict._tag === "Unserved") unserved.push({ runId: item.runId, flowId })
          else if (verdict._tag === "Drifted") {
            backlog.push(warn("backlog", `${item.runId} (${flowId}): ${what} waits; ${liveDriftText(flowId, recorded, verdict.servers)}`, liveDriftHint(item.runId, verdict.servers)))
          } else if (item.requestedAtMs === undefined || item.requestedAtMs < nowMs - staleAfterMs) {
            late.push({ runId: item.runId, servers: verdict.servers })
          }
        }
        if (unserved.length > 0) {
          const flows = [...new Set(unserved.map((u) => u.flowId))]
          backlog.push(warn(
            "backlog",
            `${unserved.length} ${what}s wait for flows no live host serves (${unserved.slice(0, 5).map((u) => `${u.runId} (${u.flowId})`).join(", ")})`,
            `start a host that serves ${flows.length === 1 ? "flow" : "flows"} ${flows.join(", ")}`
          ))
        }
        return late
      })
    const lateResumes = yield* waiting("resume delegation", resumes)
    if (lateResumes.length > 0) {
      backlog.push(warn(
        "backlog",
        `${lateResumes.length} resume delegations older than 30 s (${lateResumes.slice(0, 5).map((r) => r.runId).join(", ")}), although live hosts serve their flows with their code (${
          Hosts.describeServers([...new Map(lateResumes.flatMap((r) => r.servers).map((s) => [s.host + s.code, s])).values()])
        })`,
        "those hosts have not taken them up: at capacity or stopping? their logs say why"
      ))
    }
    const signals = yield* runtime.signalCommands({ state: "pending", limit: 500 }).pipe(Effect.orElseSucceed(() => []))
    const unowned: Array<{ readonly runId: string }> = []
    for (const s of signals) {
      const summary = yield* runtime.getRun(s.runId).pipe(Effect.option)
      if (summary._tag === "Some" && summary.value.ownerId === undefined && !unowned.some((u) => u.runId === s.runId)) unowned.push({ runId: s.runId })
    }
    const lateSignals = yield* waiting("pending signal", unowned)
    if (lateSignals.length > 0) {
      backlog.push(warn(
        "backlog",
        `${lateSignals.length} runs no process owns have pending signals (${lateSignals.slice(0, 5).map((r) => r.runId).join(", ")}); live hosts serve their flows with their code`,
        "a host delivers them on its next sweep; if they stay pending, check the hosts' logs"
      ))
    }
    // A paused queue is an operator's choice, but runs held by it look stuck: say where they are.
    const queues = yield* Effect.flatMap(Queues.Queues, (q) => q.stats()).pipe(Effect.orElseSucceed(() => []))
    for (const q of queues) {
      const waitingRuns = q.available + q.delayed
      if (!q.paused || waitingRuns === 0) continue
      backlog.push(warn(
        "backlog",
        `queue ${q.queue} is paused: ${waitingRuns} run${waitingRuns === 1 ? "" : "s"} wait in it (${q.available} available, ${q.delayed} delayed); hosts claim none until it resumes`,
        `baton queue resume ${q.queue}`
      ))
    }
    findings.push(...(backlog.length === 0 ? [ok("backlog", "no old delegations or undelivered signals")] : backlog))
    return findings
  })

/** Prints findings (a line each, or one JSON document); answers the exit code (0, or 6 with a FAIL). */
export const report = (findings: ReadonlyArray<Finding>, json: boolean) =>
  Effect.gen(function*() {
    const failed = findings.some((f) => f.level === "FAIL")
    if (json) {
      yield* Console.log(JSON.stringify({ ok: !failed, checks: findings }))
    } else {
      const width = Math.max(...findings.map((f) => f.check.length))
      for (const f of findings) {
        yield* Console.log(`${f.level.padEnd(4)}  ${f.check.padEnd(width)}  ${f.message}${f.hint === undefined ? "" : `\n${" ".repeat(width + 8)}hint: ${f.hint}`}`)
      }
    }
    return failed ? 6 : 0
  })
