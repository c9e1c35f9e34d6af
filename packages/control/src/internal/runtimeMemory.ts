/**
 * The in-memory control runtime (`ControlRuntime.layerMemory`): the port's contract held in `Map`s.
 */
import type * as Journal from "@baton/journal/Journal"
import { Clock, Effect, Fiber } from "effect"
import * as RunStore from "@baton/run-store/RunStore"
import * as Cancellation from "../Cancellation.js"
import {
  AlreadyResolved,
  ApprovalRequired,
  ClaimLost,
  FlowNotFound,
  IdempotencyConflict,
  InvalidInput,
  PersistenceError,
  PlanDenied,
  PlanNotFound,
  RunNotFound
} from "../ControlError.js"
import type { ApprovalTarget, Principal, Receipt, RunStatus, RunSummary, SignalPayload, SteerMessage } from "../ControlSchema.js"
import { isTerminalStatus } from "../ControlSchema.js"
import type {
  ApprovalDecision,
  ClaimedRun,
  ApprovalToken,
  BulkGrant,
  MemoryOptions,
  ParkRequest,
  RunCursor,
  RunKeyClaim,
  Service,
  SignalCommand,
  SignalState,
  StartedRun,
  StoredPlan
} from "../ControlRuntime.js"
import { tryCanonical } from "./canonical.js"
import { checkStart, startBinding } from "./sqlStarts.js"
import { CodeDrift } from "../ControlError.js"
import {
  checkLimit,
  checkOrdinal,
  checkPark,
  checkReason,
  checkSignal,
  checkSignalQuery,
  checkSteer,
  checkTarget,
  delegatingAuthority,
  identityOf,
  parkStatus
} from "./runtimeChecks.js"
import { alreadyApplied, cursorIssue, planAfterIssue } from "./runtimeChecks.js"
import * as CancelEvidence from "./cancelEvidence.js"
import { buildCard, checkPlanInput, decodeInput, planFingerprint, planKeyConflict } from "./runtimePlanning.js"

interface MemoryRun {
  summary: RunSummary
  storeStatus: "pending" | "running" | "suspended" | "completed" | "failed" | "cancelled"
  fence: string | undefined
  seq: number
  principal: { readonly id: string; readonly kind: string } | undefined
  wait: ParkRequest | undefined
}

interface MemorySignal {
  seq: number
  commandId: string
  runId: string
  signal: SignalPayload
  token: string | null
  state: SignalState
  principal: Principal | undefined
}

const clone = <A>(value: A): A => structuredClone(value)

const storeStatusOf = (status: RunStatus): MemoryRun["storeStatus"] =>
  status === "accepted" || status === "running"
    ? "running"
    : status === "parked" || status === "waiting-approval"
    ? "suspended"
    : status

const memoryOwner = "memory-owner"

/**
 * Cancel evidence of one run from `journal`, in journal order: its attributed requests and engine
 * interruptions (the memory runtime keeps no lineage and no store request column).
 */
const readEvidence = (journal: Journal.Service, runId: string) =>
  Effect.gen(function*() {
    const entries: Array<CancelEvidence.EvidenceEntry> = []
    let after: number | undefined
    for (;;) {
      const page = yield* journal.entries({
        runId,
        eventTypes: CancelEvidence.evidenceEventTypes,
        limit: 100,
        ...(after === undefined ? {} : { after })
      })
      entries.push(...page.entries)
      if (!page.hasMore || page.entries.length === 0) return entries
      after = page.entries.at(-1)!.seq
    }
  }).pipe(
    Effect.mapError((cause) => new PersistenceError({ operation: "project runs", message: cause.message, cause }))
  )

/**
 * Build the memory runtime. With a `journal`, summaries read by `getRun` and `queryRuns` carry the
 * `cancellation` its entries attribute, as the SQL runtime's do.
 */
export const makeMemory = (options: MemoryOptions, journal?: Journal.Service): Effect.Effect<Service> =>
  Effect.sync(() => {
    const flows = new Map((options.flows ?? []).map((flow) => [flow.flowId, flow]))
    const authority = options.approvalAuthority ??
      delegatingAuthority([{ id: "local", kind: "operator" }, { id: "memory", kind: "test" }])
    const now = options.now === undefined
      ? Clock.currentTimeMillis
      : Effect.sync(options.now)
    const sequences = new Map<string, number>()
    const next = (name: string) => {
      const value = (sequences.get(name) ?? 0) + 1
      sequences.set(name, value)
      return value
    }
    const startKeys = new Map<string, { readonly fingerprint: string; readonly runId: string }>()
    const plans = new Map<string, { card: StoredPlan["card"]; decodedInput: unknown; decision: StoredPlan["decision"]; rowSeq: number }>()
    const planKeys = new Map<string, { fingerprint: string; planId: string }>()
    const tokens = new Map<string, { tokenId: string; target: ApprovalTarget; decision: ApprovalDecision }>()
    const grantRows = new Map<string, BulkGrant>()
    const mutations = new Map<string, { fingerprint: string; receipt: Receipt }>()
    const runKeys = new Map<string, { fingerprint: string; claimant: string }>()
    const runs = new Map<string, MemoryRun>()
    const resumes = new Map<string, { sequence: number; requestedAtMs: number; consent?: number | undefined }>()
    const messages: Array<{ seq: number; runId: string; kind: "signal" | "steer"; payload: unknown }> = []
    const signals: Array<MemorySignal> = []
    const fibers = new Map<string, Fiber.RuntimeFiber<unknown, unknown>>()
    let signalCursor = 0

    const identityKey = (target: ApprovalTarget) => {
      const id = identityOf(target)
      return JSON.stringify([id.tag, id.runId, id.targetId])
    }
    const tokenOf = (row: { tokenId: string; target: ApprovalTarget; decision: ApprovalDecision }): ApprovalToken =>
      clone({ ...row.decision, tokenId: row.tokenId, target: row.target })
    const requireRun = (runId: string) =>
      Effect.suspend(() => {
        const run = runs.get(runId)
        return run === undefined ? Effect.fail(new RunNotFound({ runId })) : Effect.succeed(run)
      })
    const project = (run: MemoryRun): RunSummary => {
      const resume = resumes.get(run.summary.runId)
      return clone({
        ...run.summary,
        ...(run.principal === undefined ? {} : { launchedBy: run.principal }),
        ...(resume === undefined || isTerminalStatus(run.summary.status) ? {} : { pendingResume: resume.sequence })
      })
    }
    // A listing flags a run whose journal evidence does not decode; a single read fails with it.
    const attributedOrIssue = (summary: RunSummary): Effect.Effect<{ summary: RunSummary; error?: PersistenceError }, PersistenceError> =>
      journal === undefined
        ? Effect.succeed({ summary })
        : Effect.map(readEvidence(journal, summary.runId), (entries) => {
          const { cancelledAt, issues, requests } = CancelEvidence.collect(entries)
          const error = issues.get(summary.runId)
          const at = cancelledAt.get(summary.runId)
          const cancellation = Cancellation.attribute({
            runs: [{ runId: summary.runId, ...(at === undefined ? {} : { cancelledAt: at }) }],
            requests
          }).get(summary.runId)
          return {
            summary: {
              ...summary,
              ...(cancellation === undefined ? {} : { cancellation }),
              ...(error === undefined ? {} : { readable: false as const, issue: error.message })
            },
            ...(error === undefined ? {} : { error })
          }
        })
    const attributed = (summary: RunSummary): Effect.Effect<RunSummary, PersistenceError> =>
      Effect.flatMap(attributedOrIssue(summary), (read) => read.error === undefined ? Effect.succeed(read.summary) : Effect.fail(read.error))
    const newFence = () => `fence-${next("fence")}`
    const settleSignalsOf = (runId: string) => {
      for (const row of signals) if (row.runId === runId && row.state === "pending") row.state = "terminal"
    }
    const transition = (run: MemoryRun, status: RunStatus) =>
      Effect.map(now, (at) => {
        const storeStatus = storeStatusOf(status)
        const { ownerId: _o, parkedBy: _p, ...rest } = run.summary
        run.summary = {
          ...rest,
          status,
          updatedAt: at,
          ...(storeStatus === "running" ? { ownerId: memoryOwner } : {}),
          ...(storeStatus === "suspended" && status !== "accepted" ? { parkedBy: memoryOwner } : {})
        }
        run.storeStatus = storeStatus
        if (storeStatus !== "running") run.fence = undefined
        if (storeStatus !== "suspended") run.wait = undefined
        // A finished run settles its pending signals with it: nothing can deliver them anymore.
        if (isTerminalStatus(status)) settleSignalsOf(run.summary.runId)
        return project(run)
      })
    const fenced = (runId: string, fence: string) =>
      Effect.flatMap(requireRun(runId), (run) =>
        run.storeStatus === "running" && run.fence === fence ? Effect.succeed(run) : Effect.fail(new ClaimLost({ runId })))
    const claim = (run: MemoryRun) =>
      Effect.suspend(() => {
        run.fence = newFence()
        run.wait = undefined
        return transition(run, "accepted")
      })
    const resume = (runId: string) =>
      Effect.flatMap(requireRun(runId), (run) =>
        isTerminalStatus(run.summary.status) || run.storeStatus === "running" ? Effect.succeed(project(run)) : claim(run))
    const toCommand = (row: MemorySignal): SignalCommand =>
      clone({
        commandId: row.commandId,
        runId: row.runId,
        signal: row.signal,
        token: row.token,
        state: row.state,
        ...(row.principal === undefined ? {} : { principal: row.principal })
      })
    const findSignal = (commandId: string) => signals.find((row) => row.commandId === commandId)

    const codeDrift = (runId: string): Effect.Effect<CodeDrift | undefined, RunNotFound> =>
      Effect.map(requireRun(runId), (run) => {
        const recorded = run.summary.executionDigest
        if (recorded === undefined) return undefined
        const current = flows.get(run.summary.flowId)?.executionDigest
        if (current === recorded) return undefined
        return new CodeDrift({
          runId,
          flowId: run.summary.flowId,
          recorded,
          ...(current === undefined ? {} : { current })
        })
      })

    const service: Service = {
      authorizeApproval: (request) => authority.authorize(clone(request)),
      plan: (raw) =>
        Effect.gen(function*() {
          const input = yield* Effect.try({
            try: () => clone(raw),
            catch: () => new InvalidInput({ issue: "input: must be structured-cloneable JSON" })
          })
          yield* checkPlanInput(input)
          const flow = flows.get(input.flowId)
          if (flow === undefined) return yield* Effect.fail(new FlowNotFound({ flowId: input.flowId }))
          const fingerprint = yield* planFingerprint(input)
          const key = input.idempotencyKey
          const held = key === undefined ? undefined : planKeys.get(key)
          if (key !== undefined && held !== undefined) {
            if (held.fingerprint !== fingerprint) return yield* Effect.fail(planKeyConflict(key))
            const stored = plans.get(held.planId)
            if (stored !== undefined) return { card: clone(stored.card), created: false }
          }
          const decoded = yield* decodeInput(flow, input.input)
          const planId = `plan-${next("plan")}`
          const card = yield* buildCard(flow, input, decoded, planId)
          // Re-check the key with no yield between the check and the writes.
          if (key !== undefined) {
            const winner = planKeys.get(key)
            if (winner !== undefined) {
              if (winner.fingerprint !== fingerprint) return yield* Effect.fail(planKeyConflict(key))
              const stored = plans.get(winner.planId)
              if (stored === undefined) {
                return yield* Effect.fail(
                  new PersistenceError({ operation: "plan", message: `plan key ${key} names plan ${winner.planId}, which is absent` })
                )
              }
              return { card: clone(stored.card), created: false }
            }
            planKeys.set(key, { fingerprint, planId })
          }
          plans.set(planId, { card, decodedInput: clone(decoded), decision: "pending", rowSeq: next("plan_row") })
          tokens.set(identityKey(card.approval.target), { tokenId: planId, target: card.approval.target, decision: { _tag: "Pending" } })
          return { card: clone(card), created: true }
        }),
      getPlan: (planId) =>
        Effect.suspend(() => {
          const stored = plans.get(planId)
          return stored === undefined
            ? Effect.fail(new PlanNotFound({ planId }))
            : Effect.succeed(clone({ card: stored.card, decodedInput: stored.decodedInput, decision: stored.decision }))
        }),
      pagePlanIds: (request) =>
        Effect.gen(function*() {
          const limit = yield* checkLimit(request.limit)
          const after = (yield* checkOrdinal("after", request.after)) ?? 0
          const all = [...plans.values()].sort((a, b) => a.rowSeq - b.rowSeq)
          const through = (yield* checkOrdinal("through", request.through)) ?? (all.at(-1)?.rowSeq ?? 0)
          const selected = all.filter((p) => p.rowSeq > after && p.rowSeq <= through).slice(0, limit + 1)
          const page = selected.slice(0, limit)
          return {
            ids: page.map((p) => p.card.planId),
            through,
            ...(selected.length > limit ? { next: page.at(-1)!.rowSeq } : {})
          }
        }),
      queryPlans: (query) =>
        Effect.gen(function*() {
          const limit = yield* checkLimit(query.limit)
          const after = (yield* checkOrdinal("after", query.after)) ?? 0
          if (after > 0 && ![...plans.values()].some((p) => p.rowSeq === after)) {
            return yield* Effect.fail(new InvalidInput({ issue: planAfterIssue }))
          }
          const matching = [...plans.values()]
            .sort((a, b) => a.rowSeq - b.rowSeq)
            .filter((p) => p.rowSeq > after)
            .filter((p) => (query.decision === undefined || p.decision === query.decision) &&
              (query.flowId === undefined || p.card.flowId === query.flowId))
          const page = matching.slice(0, limit)
          return {
            plans: page.map((p) => clone({ card: p.card, decodedInput: p.decodedInput, decision: p.decision })),
            ...(matching.length > limit ? { next: page.at(-1)!.rowSeq } : {})
          }
        }),
      lookupApproval: (target) =>
        Effect.gen(function*() {
          const row = tokens.get(identityKey(target))
          if (row === undefined) {
            return yield* Effect.fail(
              target._tag === "Plan" ? new PlanNotFound({ planId: target.planId }) : new RunNotFound({ runId: target.runId })
            )
          }
          yield* checkTarget(row.tokenId, row.target, target)
          if (row.decision._tag !== "Pending") return yield* Effect.fail(new AlreadyResolved({ requestId: row.tokenId }))
          return tokenOf(row)
        }),
      registerApproval: (target) =>
        Effect.gen(function*() {
          yield* requireRun(target.runId)
          const key = identityKey(target)
          if (!tokens.has(key)) tokens.set(key, { tokenId: target.requestId, target: clone(target), decision: { _tag: "Pending" } })
          const row = tokens.get(key)!
          yield* checkTarget(row.tokenId, row.target, target)
          return tokenOf(row)
        }),
      installBulkGrant: (token, envelope, scope) =>
        Effect.map(now, (at) => {
          const key = identityKey(token.target)
          if (!grantRows.has(key)) grantRows.set(key, clone({ tokenId: token.tokenId, envelope, scope, installedAt: at }))
        }),
      resolveApproval: (token, decision, principal, scope = "once", reason) =>
        Effect.gen(function*() {
          yield* checkReason(reason)
          const captured = clone({ target: token.target, principal, tokenId: token.tokenId })
          const decidedAt = yield* now
          yield* authority.authorize({ principal: captured.principal, target: captured.target, decision, scope })
          const row = tokens.get(identityKey(captured.target))
          if (row === undefined || row.decision._tag !== "Pending") {
            return yield* Effect.fail(new AlreadyResolved({ requestId: captured.tokenId }))
          }
          const reasonPart = reason === undefined ? {} : { reason }
          row.decision = decision === "approved"
            ? { _tag: "Approved", decisionPrincipal: captured.principal, decidedAt, scope, ...reasonPart }
            : { _tag: "Denied", decisionPrincipal: captured.principal, decidedAt, ...reasonPart }
          if (captured.target._tag === "Plan") {
            const plan = plans.get(captured.target.planId)
            if (plan !== undefined) plan.decision = decision
          }
        }),
      launch: (planId, digest, envelope, principal, reservedRunId) =>
        Effect.gen(function*() {
          const plan = plans.get(planId)
          if (plan === undefined) return yield* Effect.fail(new PlanNotFound({ planId }))
          yield* checkTarget(planId, plan.card.approval.target, { _tag: "Plan", planId, digest, envelope })
          if (plan.decision === "pending") {
            return {
              _tag: "Parked" as const,
              receipt: { _tag: "Parked" as const, receiptId: `launch:${planId}`, planId, status: "waiting-approval" as const }
            }
          }
          if (plan.decision === "denied") return yield* Effect.fail(new PlanDenied({ planId }))
          const seq = next("run")
          const runId = reservedRunId ?? `run-${seq}`
          if (runs.has(runId)) {
            return yield* Effect.fail(new PersistenceError({ operation: "launch a run", message: `run ${runId} already exists` }))
          }
          const at = yield* now
          const deadline = plan.card.envelope.budget.deadline
          const summary: RunSummary = {
            runId,
            flowId: plan.card.flowId,
            status: "accepted",
            planId,
            planDigest: plan.card.digest,
            ...(plan.card.executionDigest === undefined ? {} : { executionDigest: plan.card.executionDigest }),
            ownerId: memoryOwner,
            ...(deadline === undefined ? {} : { deadlineAt: at + deadline }),
            createdAt: at,
            updatedAt: at
          }
          const run: MemoryRun = {
            summary,
            storeStatus: "running",
            fence: newFence(),
            seq,
            principal: principal === undefined ? undefined : { id: principal.id, kind: principal.kind },
            wait: undefined
          }
          runs.set(runId, run)
          return {
            _tag: "Started" as const,
            receipt: { _tag: "Accepted" as const, receiptId: `launch:${planId}:${runId}`, runId },
            run: project(run)
          }
        }),
      getRun: (runId) => Effect.flatMap(requireRun(runId), (run) => attributed(project(run))),
      pageRunIds: (request) =>
        Effect.gen(function*() {
          const limit = yield* checkLimit(request.limit)
          const after = (yield* checkOrdinal("after", request.after)) ?? 0
          const all = [...runs.values()].sort((a, b) => a.seq - b.seq)
          const through = (yield* checkOrdinal("through", request.through)) ?? (all.at(-1)?.seq ?? 0)
          const selected = all.filter((r) => r.seq > after && r.seq <= through).slice(0, limit + 1)
          const page = selected.slice(0, limit)
          return {
            ids: page.map((r) => r.summary.runId),
            through,
            ...(selected.length > limit ? { next: page.at(-1)!.seq } : {})
          }
        }),
      queryRuns: (query) =>
        Effect.gen(function*() {
          const limit = yield* checkLimit(query.limit)
          const f = query.filters ?? {}
          // The same refusals as the SQL runtime's, before anything is read.
          yield* checkOrdinal("since", f.since)
          yield* checkOrdinal("until", f.until)
          if (query.cursor !== undefined) {
            const ok = typeof query.cursor.runId === "string" && Number.isSafeInteger(query.cursor.rowSeq) &&
              query.cursor.rowSeq >= 0
            if (!ok) return yield* Effect.fail(new InvalidInput({ issue: "cursor: must be a cursor this listing returned" }))
          }
          if (query.order !== undefined && query.order !== "newest" && query.order !== "oldest") {
            return yield* Effect.fail(new InvalidInput({ issue: "order: must be newest or oldest" }))
          }
          const cursor: RunCursor | undefined = query.cursor
          // As in SQL: a cursor must name the run (and position) a page ended on.
          if (cursor !== undefined && runs.get(cursor.runId)?.seq !== cursor.rowSeq) {
            return yield* Effect.fail(new InvalidInput({ issue: cursorIssue }))
          }
          const newest = query.order === "newest"
          const ids = f.runIds === undefined ? undefined : new Set(f.runIds)
          const matching = [...runs.values()]
            .sort((a, b) => (newest ? b.seq - a.seq : a.seq - b.seq))
            .filter((r) => cursor === undefined || (newest ? r.seq < cursor.rowSeq : r.seq > cursor.rowSeq))
            .filter((r) => {
              const s = r.summary
              return (f.flowId === undefined || s.flowId === f.flowId) &&
                (f.status === undefined || s.status === f.status) &&
                (f.terminal === undefined || isTerminalStatus(s.status) === f.terminal) &&
                (f.parentRunId === undefined || s.parentRunId === f.parentRunId) &&
                (f.lineageId === undefined || s.lineageId === f.lineageId) &&
                (f.since === undefined || s.createdAt >= f.since) &&
                (f.until === undefined || s.createdAt < f.until) &&
                (f.launchedBy === undefined ||
                  (r.principal?.id === f.launchedBy.id && (f.launchedBy.kind === undefined || r.principal.kind === f.launchedBy.kind))) &&
                (ids === undefined || ids.has(s.runId))
            })
          const page = matching.slice(0, limit)
          const last = page.at(-1)
          const items = yield* Effect.forEach(page, (run) => Effect.map(attributedOrIssue(project(run)), (read) => read.summary))
          return {
            items,
            ...(matching.length > limit && last !== undefined ? { nextCursor: { rowSeq: last.seq, runId: last.summary.runId } } : {})
          }
        }),
      // The same answers the sweep's own reads give, so a probe never hides work from it.
      hostProbe: (query) =>
        Effect.all({
          signals: Effect.map(service.pendingSignals, (pending) => pending.length > 0),
          resumes: Effect.map(service.pendingResumes, (pending) => pending.length > 0),
          candidates: Effect.map(service.hostCandidates({ ...query, limit: 1 }), (page) => page.candidates.length > 0)
        }),
      // The same rule as the SQL runtime's, run by asking this runtime's own reads and claims run by run.
      claimNext: (query) =>
        Effect.gen(function*() {
          const most = RunStore.claimAndOwnManyMax
          if (!Number.isSafeInteger(query.limit) || query.limit < 1 || query.limit > most) {
            return yield* Effect.fail(new InvalidInput({ issue: `limit: must be an integer in 1..${most}` }))
          }
          const page = yield* service.hostCandidates(query)
          const claimed: Array<ClaimedRun> = []
          for (const candidate of page.candidates) {
            if (candidate.kind !== "released" || query.exceptQueues?.includes(candidate.queue) === true) continue
            if ((yield* service.codeDrift(candidate.runId).pipe(Effect.orElseSucceed(() => undefined))) !== undefined) continue
            const summary = yield* Effect.either(service.resume(candidate.runId, { scope: "any" }))
            if (summary._tag === "Left" || summary.right.ownerId === undefined) continue
            claimed.push({
              summary: summary.right,
              queue: candidate.queue,
              fence: summary.right.ownerId,
              heartbeatAtMs: query.nowMs,
              neverDriven: false
            })
          }
          return { claimed, leasesWaiting: false }
        }),
      hostCandidates: (query) =>
        Effect.gen(function*() {
          const limit = yield* checkLimit(query.limit)
          if (!Number.isSafeInteger(query.nowMs) || query.nowMs < 0) {
            return yield* Effect.fail(new InvalidInput({ issue: "nowMs: must be a non-negative safe integer" }))
          }
          const wanted = query.flowIds === undefined ? undefined : new Set(query.flowIds)
          const candidates = [...runs.values()]
            .sort((a, b) => a.seq - b.seq)
            .filter((r) => r.storeStatus === "suspended" && r.summary.status === "accepted" && r.wait === undefined)
            .filter((r) => wanted === undefined || wanted.has(r.summary.flowId))
            .slice(0, limit)
            .map((r) => ({
              runId: r.summary.runId,
              flowId: r.summary.flowId,
              kind: "released" as const,
              createdSeq: r.seq,
              // The memory runtime keeps no queues: every run is in the default one.
              queue: "default",
              updatedAt: r.summary.updatedAt
            }))
          return { candidates }
        }),
      listFlows: Effect.sync(() => [...flows.values()].map((f) => ({ flowId: f.flowId, description: f.description }))),
      deliverSignal: (runId, signal) =>
        Effect.zipRight(checkSignal({ runId }, signal), requireRun(runId)).pipe(Effect.map(() => {
          messages.push({ seq: next("message"), runId, kind: "signal", payload: clone(signal) })
        })),
      admitSignal: (commandId, runId, signal, principal) =>
        Effect.zipRight(checkSignal({ commandId, runId }, signal, principal), requireRun(runId)).pipe(Effect.map((run) => {
          const seq = next("signal")
          if (findSignal(commandId) !== undefined) return
          signals.push({ seq, commandId, runId, signal: clone(signal), token: null, state: "pending", principal: clone(principal) })
          // A run that already finished answers no signal (the facade answers `Terminal` before this).
          if (isTerminalStatus(run.summary.status)) settleSignalsOf(runId)
        })),
      signalCommand: (commandId) =>
        Effect.sync(() => {
          const row = findSignal(commandId)
          return row === undefined ? undefined : toCommand(row)
        }),
      pendingSignals: Effect.sync(() => {
        const read = () => signals.filter((s) => s.state === "pending" && s.seq > signalCursor).slice(0, 100)
        let rows = read()
        if (rows.length === 0 && signalCursor !== 0) {
          signalCursor = 0
          rows = read()
        }
        signalCursor = rows.at(-1)?.seq ?? 0
        return rows.map(toCommand)
      }),
      signalCommands: (query) =>
        Effect.map(checkSignalQuery(query), (limit) =>
          signals
            .filter((s) =>
              (query.runId === undefined || s.runId === query.runId) &&
              (query.name === undefined || s.signal.name === query.name) &&
              (query.waitToken === undefined || s.token === query.waitToken) &&
              (query.state === undefined || s.state === query.state)
            )
            .slice(0, limit)
            .map(toCommand)),
      bindSignal: (commandId, token) =>
        Effect.suspend(() => {
          const row = findSignal(commandId)
          if (row === undefined) {
            return Effect.fail(new PersistenceError({ operation: "bind a signal", message: `No pending signal command ${commandId}` }))
          }
          if (row.token === null && row.state === "pending" && !signals.some((s) => s.token === token)) row.token = token
          return Effect.succeed(row.token)
        }),
      settleSignal: (commandId, state) =>
        Effect.sync(() => {
          const row = findSignal(commandId)
          if (row !== undefined && row.state === "pending") row.state = state
        }),
      deliveredSignals: (runId) =>
        Effect.map(requireRun(runId), () => [
          ...messages.filter((m) => m.runId === runId && m.kind === "signal").map((m) => clone(m.payload as SignalPayload)),
          ...signals.filter((s) => s.runId === runId && s.state !== "rejected").map((s) => clone(s.signal))
        ]),
      appendSteer: (runId, message) =>
        Effect.zipRight(checkSteer(runId, message), requireRun(runId)).pipe(Effect.map(() => {
          const seq = next("message")
          messages.push({ seq, runId, kind: "steer", payload: clone(message) })
          return seq
        })),
      steers: (runId, after = 0) =>
        Effect.map(requireRun(runId), () =>
          messages
            .filter((m) => m.runId === runId && m.kind === "steer" && m.seq > after)
            .map((m) => ({ seq: m.seq, message: clone(m.payload as SteerMessage) }))),
      requestResume: (runId, options) =>
        Effect.gen(function*() {
          const run = yield* requireRun(runId)
          if (isTerminalStatus(run.summary.status)) {
            return yield* Effect.fail(new InvalidInput({ issue: `run ${runId} is ${run.summary.status} and cannot take a resume` }))
          }
          const sequence = next("resume")
          const at = yield* now
          const prior = resumes.get(runId)
          resumes.set(runId, { sequence, requestedAtMs: at, consent: options?.consent ?? prior?.consent })
          return sequence
        }),
      pendingResumes: Effect.sync(() =>
        [...resumes.entries()]
          .filter(([runId]) => {
            const run = runs.get(runId)
            return run !== undefined && !isTerminalStatus(run.summary.status)
          })
          .sort((a, b) => a[1].sequence - b[1].sequence)
          .map(([runId, r]) => ({
            runId,
            sequence: r.sequence,
            requestedAtMs: r.requestedAtMs,
            ...(r.consent === undefined ? {} : { consent: r.consent })
          }))
      ),
      clearResume: (runId, sequence) =>
        Effect.sync(() => {
          if (resumes.get(runId)?.sequence === sequence) resumes.delete(runId)
        }),
      registerFiber: (runId, fiber) =>
        Effect.sync(() => {
          fibers.set(runId, fiber)
          fiber.addObserver(() => {
            if (fibers.get(runId) === fiber) fibers.delete(runId)
          })
        }),
      interrupt: (runId, settle = (effect) => effect) =>
        Effect.gen(function*() {
          const run = yield* requireRun(runId)
          if (isTerminalStatus(run.summary.status)) return project(run)
          if (run.storeStatus !== "running") return yield* Effect.fail(new ClaimLost({ runId }))
          const fence = run.fence!
          const fiber = fibers.get(runId)
          if (fiber !== undefined) {
            yield* Fiber.interrupt(fiber)
            if (fibers.get(runId) === fiber) fibers.delete(runId)
          }
          return yield* settle(Effect.suspend(() => {
            if (isTerminalStatus(run.summary.status)) return Effect.succeed(project(run))
            if (run.fence !== fence) return Effect.fail(new ClaimLost({ runId }))
            return transition(run, "cancelled")
          }))
        }),
      codeDrift,
      codeDrifts: (runs) =>
        Effect.reduce(runs, new Map<string, CodeDrift>(), (drifts, summary) =>
          Effect.map(Effect.either(codeDrift(summary.runId)), (drift) => {
            // As the SQL runtime: a run that cannot be read is left out.
            if (drift._tag === "Right" && drift.right !== undefined) drifts.set(summary.runId, drift.right)
            return drifts
          })),
      recordedCode: (runId) =>
        Effect.map(requireRun(runId), (run) => ({
          ...(run.summary.executionDigest === undefined ? {} : { executionDigest: run.summary.executionDigest }),
          ...(run.summary.engineVersion === undefined ? {} : { engineVersion: run.summary.engineVersion })
        })),
      resume: (runId) => resume(runId),
      resumeAdopting: (runId) =>
        Effect.gen(function*() {
          const run = yield* requireRun(runId)
          if (isTerminalStatus(run.summary.status) || run.storeStatus === "running") return project(run)
          const flow = flows.get(run.summary.flowId)
          if (flow === undefined) {
            return yield* Effect.fail(
              new CodeDrift({
                runId,
                flowId: run.summary.flowId,
                ...(run.summary.executionDigest === undefined ? {} : { recorded: run.summary.executionDigest })
              })
            )
          }
          const { executionDigest: _e, ...rest } = run.summary
          run.summary = { ...rest, ...(flow.executionDigest === undefined ? {} : { executionDigest: flow.executionDigest }) }
          return yield* claim(run)
        }),
      claimFence: (runId) =>
        Effect.flatMap(requireRun(runId), (run) =>
          run.storeStatus === "running" && run.fence !== undefined ? Effect.succeed(run.fence) : Effect.fail(new ClaimLost({ runId }))),
      releasePending: (runId, fence) =>
        Effect.flatMap(fenced(runId, fence), (run) => transition(run, "accepted").pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              run.storeStatus = "suspended"
              run.fence = undefined
              const { ownerId: _o, ...rest } = run.summary
              run.summary = rest
            })
          ),
          Effect.map(() => project(run))
        )),
      park: (runId, fence, wait) =>
        Effect.gen(function*() {
          yield* checkPark(wait)
          const run = yield* fenced(runId, fence)
          const summary = yield* transition(run, parkStatus(wait.reason))
          run.wait = clone(wait)
          return summary
        }),
      writeStatus: (runId, fence, status) => Effect.flatMap(fenced(runId, fence), (run) => transition(run, status)),
      stampPrincipal: (submitted) =>
        Effect.map(now, (stampedAt) => ({
          id: submitted?.id ?? options.principal?.id ?? "memory",
          kind: submitted?.kind ?? options.principal?.kind ?? "test",
          stampedAt
        })),
      lookupMutation: (key, fingerprint) =>
        Effect.sync(() => {
          const prior = mutations.get(key)
          if (prior === undefined) return undefined
          if (prior.fingerprint !== fingerprint) {
            return { _tag: "Conflict" as const, message: `idempotency key ${key} was used for another mutation` }
          }
          return alreadyApplied(key, prior.receipt)
        }),
      recordMutation: (key, fingerprint, receipt) =>
        Effect.suspend(() => {
          const prior = mutations.get(key)
          if (prior === undefined) {
            mutations.set(key, { fingerprint, receipt: clone(receipt) })
            return Effect.void
          }
          return prior.fingerprint === fingerprint && JSON.stringify(prior.receipt) === JSON.stringify(receipt)
            ? Effect.void
            : Effect.fail(new PersistenceError({ operation: "record a mutation", message: `idempotency key ${key} already holds another receipt` }))
        }),
      claimRunKey: (key, fingerprint) =>
        Effect.suspend((): Effect.Effect<RunKeyClaim, InvalidInput | PersistenceError> => {
          const claimant = globalThis.crypto.randomUUID()
          if (!runKeys.has(key)) runKeys.set(key, { fingerprint, claimant })
          const holder = runKeys.get(key)!
          if (holder.fingerprint !== fingerprint) {
            return Effect.fail(new InvalidInput({ issue: `idempotency key ${key} was used for another run` }))
          }
          if (holder.claimant === claimant) return Effect.succeed({ _tag: "Claimed" as const })
          const receipt = mutations.get(key)
          if (receipt === undefined || receipt.fingerprint !== fingerprint) {
            return Effect.fail(new PersistenceError({ operation: "claim a run key", message: `run key ${key} has no matching receipt` }))
          }
          return Effect.succeed({ _tag: "Raced" as const, receipt: clone(receipt.receipt) })
        }),
      releaseRunKey: (key) => Effect.sync(() => void runKeys.delete(key)),
      grants: Effect.sync(() => [...grantRows.values()].sort((a, b) => a.installedAt - b.installedAt).map(clone)),
      // The same rules as the SQL start, composed from this runtime's plan and launch; queue order,
      // availability and retry are kept by the SQL runtime only (nothing here claims by them).
      start: (request) =>
        Effect.gen(function*() {
          yield* checkStart(request)
          const flow = flows.get(request.flowId)
          if (flow === undefined) return yield* Effect.fail(new FlowNotFound({ flowId: request.flowId }))
          if (flow.approval === "required") return yield* Effect.fail(new ApprovalRequired({ flowId: flow.flowId }))
          const many = request.inputs.length !== 1
          const admitted = yield* Effect.forEach(request.inputs, (input, index) =>
            Effect.gen(function*() {
              const decoded = yield* decodeInput(flow, input).pipe(
                Effect.mapError((e) => many ? new InvalidInput({ issue: `inputs[${index}].${e.issue}` }) : e)
              )
              const bound = tryCanonical(startBinding(flow.flowId, decoded, request), "input")
              if (!bound.ok) return yield* Effect.fail(new InvalidInput({ issue: bound.issue }))
              const fingerprint = bound.text
              const key = request.idempotencyKeys?.[index]
              const held = key === undefined ? undefined : startKeys.get(key)
              if (held !== undefined && held.fingerprint !== fingerprint) {
                return yield* Effect.fail(new IdempotencyConflict({ field: many ? `idempotencyKeys[${index}]` : "idempotencyKey" }))
              }
              return { decoded, fingerprint, key }
            }))
          const out: Array<StartedRun> = []
          for (const item of admitted) {
            const held = item.key === undefined ? undefined : startKeys.get(item.key)
            if (held !== undefined) {
              const run = yield* Effect.orDie(service.getRun(held.runId))
              out.push({ run, plan: yield* Effect.orDie(service.getPlan(run.planId!)), created: false, handed: false })
              continue
            }
            const { card } = yield* service.plan({ flowId: flow.flowId, input: item.decoded })
            const stored = plans.get(card.planId)!
            const at = yield* now
            stored.decision = "approved"
            tokens.set(identityKey(card.approval.target), {
              tokenId: card.planId,
              target: card.approval.target,
              decision: { _tag: "Approved", decisionPrincipal: request.principal, decidedAt: at, scope: "once" }
            })
            const launched = yield* Effect.orDie(service.launch(card.planId, card.digest, card.envelope, request.principal))
            if (launched._tag !== "Started") return yield* Effect.dieMessage("start: an approved plan parked")
            const hand = request.hand && request.availableAtMs <= at
            const run = hand
              ? launched.run
              : yield* Effect.orDie(service.releasePending(launched.run.runId, yield* Effect.orDie(service.claimFence(launched.run.runId))))
            if (item.key !== undefined) startKeys.set(item.key, { fingerprint: item.fingerprint, runId: run.runId })
            out.push({ run, plan: yield* Effect.orDie(service.getPlan(card.planId)), created: true, handed: hand })
          }
          return out
        }),
      runResult: () => Effect.succeed(undefined),
      // Queue order and retries are the SQL runtime's; here every run is in "default", attempt 1.
      queueing: (runId) => Effect.succeed(runs.has(runId) ? { queue: "default", attempt: 1, retry: undefined } : undefined),
      requeue: (runId, fence) => service.releasePending(runId, fence)
    }
    return service
  })
