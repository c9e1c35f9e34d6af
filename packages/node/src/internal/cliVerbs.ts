/**
 * The CLI's verbs over the control facade and the stores' public reads. Each verb runs
 * inside the client-mode runtime `cliSession` builds; failures are mapped to exit codes by the caller.
 */
import * as Control from "@baton/control/Control"
import * as ControlRuntime from "@baton/control/ControlRuntime"
import * as ControlSchema from "@baton/control/ControlSchema"
import * as Queues from "@baton/control/Queues"
import * as Companion from "@baton/journal/Companion"
import * as Journal from "@baton/journal/Journal"
import type * as JournalEvent from "@baton/journal/JournalEvent"
import * as AttemptStore from "@baton/run-store/AttemptStore"
import * as RunStore from "@baton/run-store/RunStore"
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { createHash, randomUUID } from "node:crypto"
import * as Flow from "../Flow.js"
import { CliFailure, keyConflict } from "./cliFailure.js"
import * as Parse from "./cliParse.js"
import * as Render from "./cliRender.js"
import * as Table from "./cliTable.js"
import type { Catalog, Globals } from "./cliSession.js"
import { location } from "./cliSession.js"

/** What every verb body receives. */
export interface VerbContext {
  readonly globals: Globals
  readonly catalog: Catalog | undefined
  readonly tty: boolean
}

const out = (line: string) => Console.log(line)
const outJson = (value: unknown) => Console.log(JSON.stringify(value))

const principalOf = (ctx: VerbContext, nowMs: number): ControlSchema.Principal | undefined => {
  if (ctx.globals.as === undefined) return undefined
  const p = Parse.principal(ctx.globals.as)
  return { id: p.id, kind: p.kind, stampedAt: nowMs }
}

const withPrincipal = <T extends object>(input: T, principal: ControlSchema.Principal | undefined) =>
  principal === undefined ? input : { ...input, principal }

/** A `Conflict` receipt: the key was used for another request (exit 4). */
const conflictOf = (receipt: { readonly _tag: "Conflict"; readonly message: string }): CliFailure =>
  keyConflict(receipt) ?? new CliFailure({ exitCode: 4, code: "conflict", message: receipt.message })

const emptyEnvelope: ControlSchema.Envelope = { capabilities: [], flows: [], budget: {} }

// ---------------------------------------------------------------------------------------------
// runs

/** Options of `baton runs`. */
export interface RunsOptions {
  readonly status: string | undefined
  readonly flow: string | undefined
  readonly parent: string | undefined
  readonly lineage: string | undefined
  readonly launchedBy: string | undefined
  readonly queue?: string | undefined
  readonly since: string | undefined
  readonly until: string | undefined
  readonly terminal: boolean
  readonly live: boolean
  readonly order: "newest" | "oldest"
  readonly limit: number
  readonly cursor: string | undefined
  readonly all: boolean
}

/** Builds the facade's run filters from the options; bad values are usage failures. */
export const runFilters = (o: RunsOptions, nowMs: number): ControlSchema.RunListFilters => {
  if (o.terminal && o.live) {
    throw new CliFailure({ exitCode: 2, code: "usage", message: "--terminal and --live are mutually exclusive" })
  }
  return {
    ...(o.status === undefined ? {} : { status: Parse.status(o.status) }),
    ...(o.flow === undefined ? {} : { flowId: o.flow }),
    ...(o.parent === undefined ? {} : { parentRunId: o.parent }),
    ...(o.lineage === undefined ? {} : { lineageId: o.lineage }),
    ...(o.launchedBy === undefined ? {} : { principalId: o.launchedBy }),
    ...(o.queue === undefined ? {} : { queue: Parse.queue(o.queue, "--queue") }),
    ...(o.since === undefined ? {} : { since: Parse.timePoint("--since", o.since, nowMs) }),
    ...(o.until === undefined ? {} : { until: Parse.timePoint("--until", o.until, nowMs) }),
    ...(o.terminal ? { terminal: true } : o.live ? { terminal: false } : {})
  }
}

const heartbeatsOf = (items: ReadonlyArray<ControlSchema.RunSummary>) =>
  Effect.gen(function*() {
    const store = yield* RunStore.RunStore
    const map = new Map<string, number | null>()
    for (const item of items) {
      if (item.ownerId === undefined) continue
      const row = yield* store.get(item.runId).pipe(Effect.option)
      if (row._tag === "Some") map.set(item.runId, row.value.heartbeatAtMs)
    }
    return map
  })

/** `baton runs`. */
export const runs = (ctx: VerbContext, o: RunsOptions) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const nowMs = yield* Clock.currentTimeMillis
    const filters = runFilters(o, nowMs)
    const limit = Parse.limit(o.limit)
    const items: Array<ControlSchema.RunSummary> = []
    let cursor = o.cursor
    let next: string | undefined
    const unreadable = new Map<string, UnreadableRun>()
    for (;;) {
      const page = yield* control.list({
        _tag: "runs",
        filters,
        order: o.order,
        limit,
        ...(cursor === undefined ? {} : { cursor })
      })
      if (page._tag !== "runs") break
      // control lists a row it cannot read in its place, flagged `readable: false`; it stays there.
      for (const item of page.items) {
        items.push(item)
        if (item.readable === false) unreadable.set(item.runId, yield* unreadableOf(item))
      }
      next = page.nextCursor
      if (!o.all || next === undefined) break
      cursor = next
    }
    if (unreadable.size > 0) {
      const named = [...unreadable.values()]
      yield* Console.error(
        `baton: warning: ${named.length} run(s) cannot be read (${named.slice(0, 5).map((u) => `${u.runId}: ${u.issue}`).join("; ")}${
          named.length > 5 ? "; …" : ""
        }); they are listed marked unreadable`
      )
    }
    if (ctx.globals.json) {
      return yield* outJson({
        _tag: "runs",
        items,
        ...(next === undefined || o.all ? {} : { nextCursor: next })
      })
    }
    if (items.length === 0) return yield* out("No runs.")
    const heartbeats = yield* heartbeatsOf(items.filter((item) => item.readable !== false))
    // An unreadable run is shown in place, marked: flow `?`, the status its row stores, the row's times.
    const shown: Array<ControlSchema.RunSummary> = items.map((item) => {
      const u = unreadable.get(item.runId)
      return u === undefined || item.readable !== false
        ? item
        : {
          runId: item.runId,
          flowId: "?",
          status: `${u.storedStatus ?? item.status} (unreadable)` as ControlSchema.RunSummary["status"],
          createdAt: item.createdAt,
          updatedAt: item.updatedAt
        }
    })
    yield* out(Render.runsTable(shown, heartbeats, nowMs, ctx.tty))
    if (next !== undefined && !o.all) yield* out(`next: --cursor ${Render.shellQuote(next)}`)
  })

/** A run whose row the listing cannot show (control flags it `readable: false`). */
export interface UnreadableRun {
  readonly runId: string
  readonly issue: string
  readonly storedStatus?: string | undefined
  readonly createdAt?: number | undefined
}

/** A listed run control flagged unreadable, with what its store row says (status, creation time). */
export const unreadableOf = (item: ControlSchema.RunSummary) =>
  Effect.gen(function*() {
    const store = yield* RunStore.RunStore
    const row = yield* store.get(item.runId).pipe(Effect.option)
    const unreadable: UnreadableRun = {
      runId: item.runId,
      issue: (item.issue ?? "state does not decode").replace(/^run .*?: /s, ""),
      ...(row._tag === "Some" ? { storedStatus: row.value.status, createdAt: row.value.createdAtMs } : {})
    }
    return unreadable
  })

// ---------------------------------------------------------------------------------------------
// run

const resultDigest = createHash("sha256").update("step:$result").digest("hex")

const allEntries = (runId: string, options: { readonly after?: number; readonly eventTypes?: ReadonlyArray<string> }) =>
  Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const entries: Array<JournalEvent.Entry> = []
    let after = options.after
    for (;;) {
      const page = yield* journal.entries({
        runId,
        limit: 1000,
        ...(after === undefined ? {} : { after }),
        ...(options.eventTypes === undefined || options.eventTypes.length === 0 ? {} : { eventTypes: options.eventTypes })
      })
      entries.push(...page.entries)
      const last = page.entries[page.entries.length - 1]
      if (!page.hasMore || last === undefined) break
      after = last.seq
    }
    return entries
  })

const ownershipEntries = (runId: string, after: number | undefined) =>
  Effect.gen(function*() {
    const entries: Array<JournalEvent.Entry> = []
    let cursor = after
    for (;;) {
      const page = yield* Companion.entries(Companion.runStore.stream, runId, {
        limit: 1000,
        ...(cursor === undefined ? {} : { after: cursor as never })
      })
      entries.push(...page.entries)
      const last = page.entries[page.entries.length - 1]
      if (!page.hasMore || last === undefined) break
      cursor = last.seq
    }
    return entries
  })

/** A run's own entries merged with its ownership facts (marked), in time order. */
const mergedJournal = (runId: string, withOwnership: boolean, eventTypes?: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const own = yield* allEntries(runId, eventTypes === undefined ? {} : { eventTypes })
    const facts = withOwnership ? yield* ownershipEntries(runId, undefined) : []
    const views: Array<Render.EntryView & { readonly entry: JournalEvent.Entry }> = [
      ...own.map((entry) => ({ seq: entry.seq, emittedAtMs: entry.emittedAtMs, eventType: entry.eventType, payload: entry.payload, entry })),
      ...facts
        .filter((entry) => eventTypes === undefined || eventTypes.length === 0 || eventTypes.includes(entry.eventType))
        .map((entry) => ({ seq: entry.seq, emittedAtMs: entry.emittedAtMs, eventType: entry.eventType, payload: entry.payload, ownership: true, entry }))
    ]
    return mergeByTime(views)
  })

/**
 * Interleaves the run's own entries (kept in `seq` order) with ownership facts (kept in their own
 * order) by emission time; ties keep the run's entry first.
 */
const mergeByTime = <V extends Render.EntryView>(views: ReadonlyArray<V>): Array<V> => {
  const own = views.filter((v) => v.ownership !== true)
  const facts = views.filter((v) => v.ownership === true)
  const merged: Array<V> = []
  let i = 0
  let j = 0
  while (i < own.length || j < facts.length) {
    const a = own[i]
    const b = facts[j]
    if (b === undefined || (a !== undefined && a.emittedAtMs <= b.emittedAtMs)) {
      merged.push(a!)
      i++
    } else {
      merged.push(b)
      j++
    }
  }
  return merged
}

/**
 * When the run's pending resume `sequence` was requested (epoch ms): the delegation row records it;
 * `undefined` when none of that sequence is pending any more.
 */
const resumeRequestedAt = (runId: string, sequence: number) =>
  Effect.flatMap(ControlRuntime.ControlRuntime, (runtime) => runtime.pendingResumes).pipe(
    Effect.map((resumes) => resumes.find((r) => r.runId === runId && r.sequence === sequence)?.requestedAtMs),
    Effect.orElseSucceed(() => undefined)
  )

/** `baton run <runId>`. */
export const run = (ctx: VerbContext, runId: string, tail: number) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const attempts = yield* AttemptStore.AttemptStore
    const store = yield* RunStore.RunStore
    const nowMs = yield* Clock.currentTimeMillis
    const summary = yield* control.getRun(runId)
    const row = yield* store.get(runId).pipe(Effect.option)
    const heartbeatAtMs = row._tag === "Some" ? row.value.heartbeatAtMs : null
    const list = yield* attempts.list(runId)
    const result = list.find((a) => a.stepKeyDigest === resultDigest || Render.stepNameOf(a) === "$result")
    const journal = yield* mergedJournal(runId, true)
    const journalTail = journal.slice(Math.max(0, journal.length - tail))
    const waits = summary.pendingWaits ?? []
    const resumeRequestedAtMs = summary.pendingResume === undefined ? undefined : yield* resumeRequestedAt(runId, summary.pendingResume)
    if (ctx.globals.json) {
      return yield* outJson({
        summary,
        ...(summary.pendingResume === undefined
          ? {}
          : { pendingResume: { sequence: summary.pendingResume, ...(resumeRequestedAtMs === undefined ? {} : { requestedAtMs: resumeRequestedAtMs }) } }),
        attempts: Render.sortAttempts(list),
        waits,
        journal: journalTail.map((v) => ({ ...v.entry, ...(v.ownership === true ? { ownership: true } : {}) }))
      })
    }
    const resultView = result === undefined
      ? undefined
      : {
        state: result.state,
        // A handler that returned nothing completes with outcome `{}` and no value (JSON: no result key).
        ...(typeof result.outcome === "object" && result.outcome !== null && !("value" in result.outcome)
          ? {}
          : {
            value: typeof result.outcome === "object" && result.outcome !== null
              ? (result.outcome as { value: unknown }).value
              : result.outcome
          }),
        error: result.error
      }
    yield* out(Render.runSummary(summary, { heartbeatAtMs, nowMs, resumeRequestedAtMs, result: resultView }))
    const steps = list.filter((a) => a !== result)
    yield* out("")
    yield* out(steps.length === 0 ? "No attempts." : Render.attemptsTable(steps, nowMs))
    if (waits.length > 0) {
      yield* out("")
      yield* out(Render.waitsTable(waits))
    }
    yield* out("")
    yield* out(journalTail.length === 0 ? "No journal entries." : Render.journalTable(journalTail))
  })

// ---------------------------------------------------------------------------------------------
// plans, plan

/** A listed plan control flagged unreadable (`readable: false`), its row's key prefix dropped from the issue. */
export const unreadablePlansOf = (
  items: ReadonlyArray<object | { readonly planId: string; readonly readable: false; readonly issue: string }>
): Array<{ readonly planId: string; readonly issue: string }> =>
  items.flatMap((p) =>
    "readable" in p && p.readable === false
      ? [{ planId: p.planId, issue: p.issue.replace(/^plan .*?: /s, "") }]
      : []
  )

/** `baton plans`. */
export const plans = (
  ctx: VerbContext,
  o: { readonly flow: string | undefined; readonly decision: string | undefined; readonly limit: number; readonly cursor: string | undefined }
) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const filters = {
      ...(o.flow === undefined ? {} : { flowId: o.flow }),
      ...(o.decision === undefined ? {} : { decision: Parse.decision(o.decision) })
    }
    const page = yield* control.list({
      _tag: "plans",
      filters,
      limit: Parse.limit(o.limit),
      ...(o.cursor === undefined ? {} : { cursor: o.cursor })
    })
    if (page._tag !== "plans") return
    const unreadable = unreadablePlansOf(page.items)
    if (unreadable.length > 0) {
      yield* Console.error(
        `baton: warning: ${unreadable.length} plan(s) cannot be read (${unreadable.slice(0, 5).map((u) => `${u.planId}: ${u.issue}`).join("; ")}${
          unreadable.length > 5 ? "; …" : ""
        }); they are listed marked unreadable`
      )
    }
    if (ctx.globals.json) return yield* outJson(page)
    if (page.items.length === 0) return yield* out("No plans.")
    yield* out(Render.plansTable(page.items))
    if (page.nextCursor !== undefined) yield* out(`next: --cursor ${Render.shellQuote(page.nextCursor)}`)
  })

/** `baton plan <flow>`. */
/** `plan` needs the flow in the loaded catalog: otherwise usage, exit 2. */
export const requireFlow = (catalog: Catalog | undefined, flowId: string): Effect.Effect<void, CliFailure> => {
  const flows = catalog?.flows
  if (flows === undefined || flows.length === 0) {
    return Effect.fail(
      new CliFailure({
        exitCode: 2,
        code: "flow_not_found",
        message: "no flow catalog loaded: pass --config <module> or add baton.config.mjs"
      })
    )
  }
  const known = flows.map((f) => f.id)
  return known.includes(flowId) ? Effect.void : Effect.fail(
    new CliFailure({
      exitCode: 2,
      code: "flow_not_found",
      message: `flow "${flowId}" is not registered here (known: ${known.join(", ")})`
    })
  )
}

export const plan = (ctx: VerbContext, flowId: string, input: unknown, key: string | undefined) =>
  Effect.gen(function*() {
    yield* requireFlow(ctx.catalog, flowId)
    const control = yield* Control.Control
    const card = yield* control.plan({ flowId, input, ...(key === undefined ? {} : { idempotencyKey: key }) }).pipe(
      Effect.catchIf(
        (e): e is Extract<typeof e, { readonly code: "invalid_input" }> => (e as { code?: unknown }).code === "invalid_input",
        // A key used for another plan is a conflict (4), not a refusal of this input.
        (e) => Effect.fail(keyConflict(e) ?? inputRejected(flowId, e.issue))
      )
    )
    if (ctx.globals.json) return yield* outJson(card)
    yield* out(Render.planCard(card, "pending"))
    yield* out(`next: baton approve ${card.planId}`)
  })

const inputRejected = (flowId: string, issue: string) =>
  new CliFailure({ exitCode: 2, code: "invalid_input", message: `input for ${flowId} rejected: ${issue}` })

/**
 * The flow's input schema over `input`, before the database is looked at: a refusal is
 * usage (2) even when the file is missing. The plan itself decodes it again.
 */
export const checkInput = (catalog: Catalog | undefined, flowId: string, input: unknown) => {
  const flow = catalog?.flows?.find((f) => f.id === flowId)
  return flow === undefined
    ? Effect.void
    : Effect.mapError(Flow.normalizeInput(flow, input), (e) => inputRejected(flowId, e.issue))
}

/** Reads `--input` / `--input-file` (`-` = stdin). */
export const readInput = (input: string | undefined, inputFile: string | undefined): Effect.Effect<unknown, CliFailure> =>
  Effect.gen(function*() {
    if (input !== undefined && inputFile !== undefined) {
      return yield* new CliFailure({ exitCode: 2, code: "usage", message: "pass --input or --input-file, not both" })
    }
    if (inputFile !== undefined) {
      const text = yield* Effect.tryPromise({
        try: async () => {
          const fs = await import("node:fs/promises")
          if (inputFile !== "-") return fs.readFile(inputFile, "utf8")
          const chunks: Array<Buffer> = []
          for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
          return Buffer.concat(chunks).toString("utf8")
        },
        catch: (e) => new CliFailure({ exitCode: 2, code: "usage", message: `cannot read --input-file ${inputFile}: ${String(e)}` })
      })
      return Parse.json("--input-file", text)
    }
    return input === undefined ? {} : Parse.json("--input", input)
  })

// ---------------------------------------------------------------------------------------------
// approve, deny

/** Options of `approve`/`deny`. */
export interface DecideOptions {
  readonly scope: "once" | "run" | "remembered" | undefined
  readonly reason: string | undefined
  readonly key: string | undefined
}

/**
 * The default key of a decision: `cli:<decision>:<target>`, plus a digest of the reason when one is given.
 * A repeat of the same command replays its receipt; a decision with another (or no) reason is another
 * request, so control answers it as a second decision (`already_resolved`), not as a key reused for
 * another mutation.
 */
export const defaultDecisionKey = (decision: "approve" | "deny", target: string, reason: string | undefined): string =>
  reason === undefined
    ? `cli:${decision}:${target}`
    : `cli:${decision}:${target}:${createHash("sha256").update(reason).digest("hex").slice(0, 16)}`

/** `baton approve` / `baton deny`. */
export const decide = (ctx: VerbContext, decision: "approve" | "deny", targetArg: string, o: DecideOptions) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const runtime = yield* ControlRuntime.ControlRuntime
    const nowMs = yield* Clock.currentTimeMillis
    const parsed = Parse.approvalTarget(targetArg)
    let target: ControlSchema.ApprovalTarget
    if (parsed._tag === "Plan") {
      const stored = yield* runtime.getPlan(parsed.planId)
      target = stored.card.approval.target
    } else {
      const summary = yield* control.getRun(parsed.runId)
      const open = (summary.pendingWaits ?? []).filter((w) => w.reason === "approval")
      const wait = open.find((w) => w.name === parsed.requestId)
      if ((wait === undefined || wait.tokenDigest === undefined) && ControlSchema.isTerminalStatus(summary.status)) {
        return yield* new CliFailure({ exitCode: 4, code: "terminal", message: `${parsed.runId} is already ${summary.status}` })
      }
      if (wait === undefined || wait.tokenDigest === undefined) {
        return yield* new CliFailure({
          exitCode: 3,
          code: "no_open_request",
          message: `${parsed.runId} has no open approval request "${parsed.requestId}"` +
            (open.length === 0 ? " (none are open)" : ` (open: ${open.map((w) => w.name ?? "?").join(", ")})`)
        })
      }
      const envelope = summary.planId === undefined
        ? emptyEnvelope
        : (yield* runtime.getPlan(summary.planId).pipe(Effect.map((p) => p.card.envelope), Effect.orElseSucceed(() => emptyEnvelope)))
      target = { _tag: "Node", runId: wait.runId, requestId: parsed.requestId, digest: wait.tokenDigest, envelope }
    }
    const scope = o.scope ?? (parsed._tag === "Plan" ? "run" : "once")
    const input = withPrincipal(
      {
        target,
        scope,
        idempotencyKey: o.key ?? defaultDecisionKey(decision, targetArg, o.reason),
        ...(o.reason === undefined ? {} : { reason: o.reason })
      },
      principalOf(ctx, nowMs)
    )
    const receipt = decision === "approve" ? yield* control.approve(input) : yield* control.deny(input)
    const verb = decision === "approve" ? "approved" : "denied"
    if (ctx.globals.json && (receipt._tag === "Accepted" || receipt._tag === "AlreadyApplied")) {
      yield* outJson({ receipt, decision: verb, target })
    }
    switch (receipt._tag) {
      case "Conflict":
        return yield* conflictOf(receipt)
      case "Terminal":
        return yield* new CliFailure({ exitCode: 4, code: "terminal", message: `${receipt.runId} is already ${receipt.status}` })
      case "Parked":
        return yield* new CliFailure({ exitCode: 4, code: "parked", message: `${receipt.planId} is waiting for approval` })
      case "AlreadyApplied":
        if (!ctx.globals.json) yield* out(`${targetArg}: already ${verb} (receipt ${receipt.receiptId})`)
        return
      case "Accepted": {
        if (ctx.globals.json) return
        const who = ctx.globals.as ?? "the OS user"
        yield* out(`${verb} ${targetArg} (scope ${scope}) as ${who}${o.reason === undefined ? "" : `: ${o.reason}`}`)
        if (parsed._tag === "Node") yield* out(`a host will resume ${parsed.runId}`)
        else if (decision === "approve") yield* out(`next: baton launch ${parsed.planId}`)
      }
    }
  })

// ---------------------------------------------------------------------------------------------
// launch, cancel, resume, signal

/** `baton launch <planId>`. */
export const launch = (ctx: VerbContext, planId: string, key: string | undefined) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const runtime = yield* ControlRuntime.ControlRuntime
    const nowMs = yield* Clock.currentTimeMillis
    const stored = yield* runtime.getPlan(planId)
    const receipt = yield* control.run(withPrincipal({
      _tag: "Plan" as const,
      planId,
      digest: stored.card.digest,
      envelope: stored.card.envelope,
      idempotencyKey: key ?? `cli:launch:${planId}`
    }, principalOf(ctx, nowMs)))
    if (ctx.globals.json && receipt._tag !== "Parked" && receipt._tag !== "Conflict") return yield* outJson(receipt)
    switch (receipt._tag) {
      case "Accepted":
        yield* out(receipt.runId ?? receipt.receiptId)
        return yield* out("a host will pick it up")
      case "AlreadyApplied":
        yield* out(receipt.runId ?? receipt.receiptId)
        return yield* out(`already launched as ${receipt.runId ?? "?"}`)
      case "Parked":
        return yield* new CliFailure({
          exitCode: 4,
          code: "parked",
          message: `${planId} is waiting for approval`,
          hint: `baton approve ${planId}`
        })
      case "Conflict":
        return yield* conflictOf(receipt)
      case "Terminal":
        return yield* new CliFailure({ exitCode: 4, code: "terminal", message: `${receipt.runId} is already ${receipt.status}` })
    }
  })

const ownerText = (summary: ControlSchema.RunSummary): string | undefined => {
  const owner = Render.parseOwner(summary.ownerId)
  return owner === undefined ? undefined : Render.hostPid(owner)
}

/** `baton cancel <runId>`. */
export const cancel = (ctx: VerbContext, runId: string, o: { readonly reason: string | undefined; readonly key: string | undefined }) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const nowMs = yield* Clock.currentTimeMillis
    const receipt = yield* control.cancel(withPrincipal({
      runId,
      idempotencyKey: o.key ?? `cli:cancel:${randomUUID()}`,
      ...(o.reason === undefined ? {} : { reason: o.reason })
    }, principalOf(ctx, nowMs)))
    if (receipt._tag === "Terminal" && receipt.status !== "cancelled") {
      return yield* new CliFailure({ exitCode: 4, code: "terminal", message: `${receipt.runId} is already ${receipt.status}` })
    }
    if (receipt._tag === "Conflict") return yield* conflictOf(receipt)
    if (ctx.globals.json) return yield* outJson(receipt)
    if (receipt._tag === "Terminal") return yield* out("cancelled")
    const summary = yield* control.getRun(runId)
    if (summary.status === "cancelled") return yield* out("cancelled")
    const owner = ownerText(summary)
    yield* out(owner === undefined ? "cancel requested; a host will stop it" : `cancel requested; owner ${owner} will stop it`)
  })

// ---------------------------------------------------------------------------------------------
// queues

/** `baton queue pause <queue>` and `baton queue resume <queue>`: prints the queue's settings after. */
export const queueSwitch = (ctx: VerbContext, action: "pause" | "resume", queue: string) =>
  Effect.gen(function*() {
    const queues = yield* Queues.Queues
    const settings = yield* (action === "pause" ? queues.pause(queue) : queues.resume(queue))
    if (ctx.globals.json) return yield* outJson({ _tag: "queue", ...settings })
    const limit = settings.concurrency === null ? "" : ` (limit ${settings.concurrency} running)`
    yield* out(
      settings.paused
        ? `${queue} paused: hosts claim none of its runs; running runs go on${limit}`
        : `${queue} resumed: hosts claim its runs again${limit}`
    )
  })

/** `baton queue stats`: per queue available, delayed, running, failed, paused and the global limit. */
export const queueStats = (ctx: VerbContext) =>
  Effect.gen(function*() {
    const stats = yield* Effect.flatMap(Queues.Queues, (queues) => queues.stats())
    if (ctx.globals.json) return yield* outJson({ _tag: "queues", items: stats })
    if (stats.length === 0) return yield* out("No queues.")
    yield* out(Table.table(
      ["QUEUE", "AVAILABLE", "DELAYED", "RUNNING", "FAILED", "PAUSED", "LIMIT"],
      stats.map((s) => [
        s.queue,
        Table.count(s.available),
        Table.count(s.delayed),
        Table.count(s.running),
        Table.count(s.failed),
        s.paused ? "yes" : "no",
        s.concurrency === null ? "-" : Table.count(s.concurrency)
      ])
    ))
  })

/** `baton resume <runId>`. */
export const resume = (ctx: VerbContext, runId: string, o: { readonly allowCodeDrift: boolean; readonly key: string | undefined }) =>
  Effect.gen(function*() {
    const control = yield* Control.Control
    const nowMs = yield* Clock.currentTimeMillis
    // Adopting code needs the code: only a catalog with the run's flow has it (the CLI drops the flows of a
    // catalog that lacks it). Without it there is no drift to allow here; the driving host checks drift.
    const adopt = o.allowCodeDrift && (ctx.catalog?.flows?.length ?? 0) > 0
    const receipt = yield* control.resume(withPrincipal({
      runId,
      idempotencyKey: o.key ?? `cli:resume:${randomUUID()}`,
      ...(adopt ? { allowCodeDrift: true } : {})
    }, principalOf(ctx, nowMs)))
    if (receipt._tag === "Terminal") {
      return yield* new CliFailure({ exitCode: 4, code: "terminal", message: `${receipt.runId} is already ${receipt.status}` })
    }
    if (receipt._tag === "Conflict") return yield* conflictOf(receipt)
    if (ctx.globals.json) return yield* outJson(receipt)
    if (receipt._tag === "Accepted" && receipt.handedTo !== undefined) {
      yield* out(`handed to ${Render.hostPid(receipt.handedTo)}, which parked it`)
    } else {
      yield* out("resumed; a host will drive it")
    }
    if (o.allowCodeDrift && !adopt) {
      yield* out(
        "--allow-code-drift: no loaded catalog has the run's flow, so no code was adopted and hosts with other code still skip the run; pass --config with the catalog of the host that should drive it"
      )
    }
  })

/** Options of `baton signal`: `waitMs` is `--timeout` in ms when `--wait` was given. */
export interface SignalOptions {
  readonly key: string | undefined
  readonly waitMs: number | undefined
  readonly pollMs: number
}

/**
 * The signal command a `signal` call with idempotency key `key` admitted. Control names a command by its
 * mutation key, `signal:actor:<actor digest>:<key>`; the CLI matches the key part, its
 * own (a fresh random one unless `--key` was given).
 */
const commandOf = (runId: string, name: string, key: string) =>
  Effect.flatMap(ControlRuntime.ControlRuntime, (runtime) => runtime.signalCommands({ runId, name, limit: 500 })).pipe(
    Effect.map((commands) => commands.filter((c) => c.commandId.startsWith("signal:actor:") && c.commandId.endsWith(`:${key}`)).at(-1))
  )

/** Why the run's host refused a command, from its `baton.signal.rejected` entry (`undefined`: not journaled). */
const refusalReason = (runId: string, commandId: string) =>
  Effect.map(allEntries(runId, { eventTypes: ["baton.signal.rejected"] }), (entries) => {
    const entry = entries.find((e) => (e.payload as { commandId?: unknown } | null)?.commandId === commandId)
    const reason = (entry?.payload as { reason?: unknown } | undefined)?.reason
    return typeof reason === "string" ? reason : undefined
  })

/** `baton signal <runId> <name> [json]`; with `--wait`, until the command is settled or `--timeout`. */
export const signal = (ctx: VerbContext, runId: string, name: string, payloadText: string | undefined, o: SignalOptions) =>
  Effect.gen(function*() {
    const payload = payloadText === undefined ? null : Parse.json("signal payload", payloadText)
    const control = yield* Control.Control
    const nowMs = yield* Clock.currentTimeMillis
    const key = o.key ?? `cli:signal:${randomUUID()}`
    const receipt = yield* control.signal(withPrincipal({
      runId,
      signal: { name, payload: payload as ControlSchema.Json },
      idempotencyKey: key
    }, principalOf(ctx, nowMs)))
    if (receipt._tag === "Terminal") {
      return yield* new CliFailure({ exitCode: 4, code: "terminal", message: `${receipt.runId} is already ${receipt.status}` })
    }
    if (receipt._tag === "Conflict") return yield* conflictOf(receipt)
    if (o.waitMs === undefined) {
      if (ctx.globals.json) return yield* outJson(receipt)
      if (receipt._tag === "AlreadyApplied") return yield* out(`signal ${name} already sent (receipt ${receipt.receiptId})`)
      return yield* out(`signal ${name} queued for the host that drives ${runId} (baton signal --wait waits for its verdict)`)
    }
    const verdict = yield* awaitVerdict(runId, name, key, o.waitMs, o.pollMs)
    switch (verdict.state) {
      case "delivered":
        if (ctx.globals.json) return yield* outJson({ receipt, commandId: verdict.commandId, state: "delivered" })
        return yield* out(`signal ${name} delivered to ${runId}`)
      case "rejected": {
        const reason = yield* refusalReason(runId, verdict.commandId)
        return yield* new CliFailure({
          exitCode: 4,
          code: "signal_rejected",
          message: `signal ${name} was refused by ${runId}: ${
            reason === "schema" ? `its payload does not match the schema of wait ${name}` : `no open wait ${name} took it`
          }`,
          hint: `baton run ${runId} shows the open waits; baton journal ${runId} --type baton.signal.rejected the refusals`
        })
      }
      case "terminal":
        return yield* new CliFailure({ exitCode: 4, code: "terminal", message: `${runId} ended before signal ${name} was delivered` })
      case "pending":
        return yield* new CliFailure({
          exitCode: 9,
          code: "signal_pending",
          message: `signal ${name} has no verdict after ${Math.round(o.waitMs / 100) / 10} s: it is still queued for the host that drives ${runId}`,
          hint: `baton doctor checks for a host that serves the run's flow; retry with a longer --timeout`
        })
    }
  })

/** Polls the command `key` admitted until a host settles it, or `waitMs` passed (`pending`). */
const awaitVerdict = (runId: string, name: string, key: string, waitMs: number, pollMs: number) =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    for (;;) {
      const command = yield* commandOf(runId, name, key)
      if (command === undefined) {
        return yield* new CliFailure({ exitCode: 1, code: "signal_not_found", message: `the signal command of ${runId} is not readable` })
      }
      if (command.state !== "pending") return { state: command.state, commandId: command.commandId } as const
      const now = yield* Clock.currentTimeMillis
      if (now - start >= waitMs) return { state: "pending", commandId: command.commandId } as const
      yield* Effect.sleep(Math.min(pollMs, Math.max(1, waitMs - (now - start))))
    }
  })

// ---------------------------------------------------------------------------------------------
// journal

/** Options of `baton journal`. */
export interface JournalOptions {
  readonly follow: boolean
  readonly after: number | undefined
  readonly types: ReadonlyArray<string>
  readonly noOwnership: boolean
  readonly pollMs: number
}

/**
 * When the run's own entry `after` was emitted (the last entry with a SEQ at or below it); `undefined`
 * when the run has none (every ownership fact is then after it).
 */
const cutTimeAfter = (runId: string, after: number) =>
  Effect.map(allEntries(runId, {}), (entries): number | undefined => entries.filter((e) => e.seq <= after).at(-1)?.emittedAtMs)

/**
 * The exit code of `journal --follow` once the run ended: 0 completed, 7 failed, 8 cancelled. Codes of
 * their own, past the CLI's failure codes (1–6), so a script tells a run that failed from a CLI that did.
 */
export const runOutcomeExit = { completed: 0, failed: 7, cancelled: 8 } as const

/**
 * The run's status for `baton journal`. The journal is how one inspects a corrupt run, so a run whose
 * stored summary (or a journal payload it reads) does not decode is warned about once and read by its
 * store row instead of failing the verb.
 */
const journalStatus = (runId: string) => {
  let warned = false
  return Effect.gen(function*() {
    const control = yield* Control.Control
    return yield* control.getRun(runId).pipe(
      Effect.map((summary): string => summary.status),
      Effect.catchIf(
        (error) => error._tag === "PersistenceError" && error.operation.startsWith("decode "),
        (error) =>
          Effect.gen(function*() {
            if (!warned) {
              warned = true
              yield* Console.error(`baton: warning: ${error.message}; the run's summary cannot be read, printing its journal`)
            }
            const row = yield* (yield* RunStore.RunStore).get(runId)
            return row.status as string
          })
      )
    )
  })
}

const isTerminal = (status: string): status is keyof typeof runOutcomeExit => status in runOutcomeExit

/** `baton journal <runId>`. */
export const journal = (ctx: VerbContext, runId: string, o: JournalOptions) =>
  Effect.gen(function*() {
    const statusOf = journalStatus(runId)
    yield* statusOf
    const types = o.types.length === 0 ? undefined : o.types
    const print = (views: ReadonlyArray<Render.EntryView & { readonly entry: JournalEvent.Entry }>) =>
      Effect.forEach(views, (v) =>
        ctx.globals.json
          ? outJson({ ...v.entry, ...(v.ownership === true ? { ownership: true } : {}) })
          : out(Render.journalLine(v)), { discard: true })
    // --after counts the run's own SEQ; ownership facts (`~N`) are numbered in their companion stream, so
    // they are cut by time instead: those emitted at or after the run's entry N (where the merge puts them).
    const factsFrom = o.after === undefined ? undefined : yield* cutTimeAfter(runId, o.after)
    const keepFact = (entry: { readonly emittedAtMs: number }) => factsFrom === undefined || entry.emittedAtMs >= factsFrom
    if (!o.follow) {
      const all = (yield* mergedJournal(runId, !o.noOwnership, types)).filter((v) =>
        o.after === undefined || (v.ownership === true ? keepFact(v) : v.seq > o.after)
      )
      if (ctx.globals.json) return yield* outJson(all.map((v) => ({ ...v.entry, ...(v.ownership === true ? { ownership: true } : {}) })))
      return yield* out(all.length === 0 ? "No journal entries." : Render.journalTable(all))
    }
    // Follow: read the status first, then everything new; once a status read before the entries was
    // terminal, the entries written with that terminal status have been printed, and we stop.
    let ownAfter = o.after
    let factsAfter: number | undefined = undefined
    for (;;) {
      const status = yield* statusOf
      const own = yield* allEntries(runId, { ...(ownAfter === undefined ? {} : { after: ownAfter }), ...(types === undefined ? {} : { eventTypes: types }) })
      const facts: ReadonlyArray<JournalEvent.Entry> = o.noOwnership
        ? []
        : (yield* ownershipEntries(runId, factsAfter)).filter((entry) => factsAfter !== undefined || keepFact(entry))
      const views = [
        ...own.map((entry) => ({ seq: entry.seq, emittedAtMs: entry.emittedAtMs, eventType: entry.eventType, payload: entry.payload, entry })),
        ...facts
          .filter((entry) => types === undefined || types.includes(entry.eventType))
          .map((entry) => ({ seq: entry.seq, emittedAtMs: entry.emittedAtMs, eventType: entry.eventType, payload: entry.payload, ownership: true, entry }))
      ]
      yield* print(mergeByTime(views))
      const lastOwn = own[own.length - 1]
      if (lastOwn !== undefined) ownAfter = lastOwn.seq
      const lastFact: JournalEvent.Entry | undefined = facts[facts.length - 1]
      if (lastFact !== undefined) factsAfter = lastFact.seq
      if (isTerminal(status)) return runOutcomeExit[status]
      yield* Effect.sleep(o.pollMs)
    }
  })

/** Messages for the database the verb runs against (used by Cli for the "not found" wording). */
export const where = (ctx: VerbContext): string => location(ctx.globals)
