/**
 * Signals, steers, resume delegations and idempotency storage (the runtime halves).
 */
import * as DurableWriter from "@baton/database/DurableWriter"
import { Effect, Either } from "effect"
import { InvalidInput, PersistenceError } from "../ControlError.js"
import type { Principal, Receipt, SignalPayload, SteerMessage } from "../ControlSchema.js"
import {
  isTerminalStatus,
  Principal as PrincipalSchema,
  Receipt as ReceiptSchema,
  SignalPayload as SignalPayloadSchema,
  SteerMessage as SteerMessageSchema
} from "../ControlSchema.js"
import type { PendingResume, RunKeyClaim, SignalCommand, SignalQuery, SignalState } from "../ControlRuntime.js"
import * as Dialect from "@baton/database/Dialect"
import { alreadyApplied, checkOrdinal, checkSignal, checkSignalQuery, checkSteer } from "./runtimeChecks.js"
import type { SqlContext } from "./sqlContext.js"
import { persist } from "./sqlContext.js"
import * as Sequences from "./sqlSequences.js"
import { requireRow, runExists, summaryOf } from "./sqlRows.js"
import { corrupt, decoder } from "./storedValue.js"

interface SignalRow {
  readonly seq: number
  readonly command_id: string
  readonly run_id: string
  readonly payload_json: string
  readonly wait_token: string | null
  readonly state: string
  readonly principal_json: string | null
}

const decodeSignal = decoder(SignalPayloadSchema, "control_signal_commands.payload_json", { json: true })
const decodePrincipal = decoder(PrincipalSchema, "control_signal_commands.principal_json", { json: true })
const decodeMessageSignal = decoder(SignalPayloadSchema, "control_run_messages.payload_json", { json: true })
const decodeSteer = decoder(SteerMessageSchema, "control_run_messages.payload_json", { json: true })
const decodeReceipt = decoder(ReceiptSchema, "control_mutations.receipt_json", { json: true })
const signalStates: ReadonlyArray<string> = ["pending", "delivered", "rejected", "terminal"]

/** Decode a signal row, or the failure naming its column and rule. */
const readCommandRow = (row: SignalRow): Either.Either<SignalCommand, PersistenceError> => {
  const subject = `command ${row.command_id}`
  const signal = decodeSignal(row.payload_json, subject)
  if (Either.isLeft(signal)) return Either.left(signal.left)
  let principal: Principal | undefined
  if (row.principal_json !== null) {
    const decoded = decodePrincipal(row.principal_json, subject)
    if (Either.isLeft(decoded)) return Either.left(decoded.left)
    principal = decoded.right
  }
  if (!signalStates.includes(row.state)) {
    return Either.left(corrupt("control_signal_commands.state", subject, `must be ${signalStates.map((s) => `"${s}"`).join(" | ")}`))
  }
  return Either.right({
    commandId: row.command_id,
    runId: row.run_id,
    signal: signal.right,
    token: row.wait_token,
    state: row.state as SignalState,
    ...(principal === undefined ? {} : { principal })
  })
}

/** Decode a signal row; `undefined` when its payload, principal or state does not decode (it is quarantined). */
const commandOf = (row: SignalRow): SignalCommand | undefined => Either.getOrUndefined(readCommandRow(row))

const signalColumns = "seq, command_id, run_id, payload_json, wait_token, state, principal_json"

/** True for a run-store status no run leaves again. */
const isFinishedStoreStatus = (status: string | null | undefined) =>
  status === "completed" || status === "failed" || status === "cancelled"

/**
 * Settles every pending signal command of a finished run `terminal`: no wait of it can open again, so
 * nothing would ever deliver or reject them. Run it inside the write that finishes the run (keyed by
 * `runId`), so the run and its signal inbox settle in one transaction.
 */
export const settleSignalsOfFinishedRun = (ctx: SqlContext, runId: string) =>
  ctx.sql`UPDATE control_signal_commands SET state = 'terminal' WHERE run_id = ${runId} AND state = 'pending'`

/** Signal, steer, delegation and idempotency operations bound to one runtime context. */
export const makeSignals = (ctx: SqlContext) => {
  const { sql } = ctx
  const columns = sql.literal(signalColumns)
  let cursor = 0

  const readCommand = (commandId: string) =>
    sql<SignalRow>`SELECT ${columns} FROM control_signal_commands WHERE command_id = ${commandId}`.pipe(
      Effect.map((rows) => rows[0])
    )

  const admitSignal = (commandId: string, runId: string, signal: SignalPayload, principal?: Principal) =>
    Effect.gen(function*() {
      yield* checkSignal({ commandId, runId }, signal, principal)
      yield* runExists(ctx, runId)
      yield* ctx.write(
        runId,
        "admit a signal",
        Effect.gen(function*() {
          const seq = yield* Sequences.value(ctx, "signal")
          yield* sql`INSERT INTO control_signal_commands (seq, command_id, run_id, payload_json, wait_token, state, principal_json)
            VALUES (${seq}, ${commandId}, ${runId}, ${JSON.stringify(signal)}, NULL, 'pending',
              ${principal === undefined ? null : JSON.stringify(principal)})
            ON CONFLICT (command_id) DO NOTHING`
          // A run that already finished answers no signal: its commands are settled at once (the
          // facade answers `Terminal` before admitting; this covers callers of the port).
          const [run] = yield* sql<{ status: string }>`SELECT status FROM flows_runs WHERE run_id = ${runId}`
          if (isFinishedStoreStatus(run?.status)) yield* settleSignalsOfFinishedRun(ctx, runId)
        })
      )
    })

  const signalCommand = (commandId: string) =>
    readCommand(commandId).pipe(
      persist("read a signal command"),
      Effect.flatMap((row) => {
        if (row === undefined) return Effect.succeed(undefined)
        const command = readCommandRow(row)
        return Either.isLeft(command) ? Effect.fail(command.left) : Effect.succeed(command.right)
      })
    )

  const quarantine = (row: SignalRow) =>
    ctx.write(
      row.run_id,
      "quarantine a signal",
      sql`UPDATE control_signal_commands SET state = 'rejected' WHERE command_id = ${row.command_id} AND state = 'pending'`
    ).pipe(Effect.zipRight(Effect.logWarning(`signal command ${row.command_id} of run ${row.run_id} does not decode; rejected`)))

  const settleFinished = (runId: string) =>
    ctx.write(runId, "settle the signals of a finished run", settleSignalsOfFinishedRun(ctx, runId))

  const pendingSignals = Effect.gen(function*() {
    // PostgreSQL numbers commands without a shared row, so two admits can commit out of number order:
    // the cursor stays at or below a settled number, never passing an admit still in flight.
    const bound = ctx.isPostgres ? yield* Sequences.settled(ctx, "read pending signals", "signal") : undefined
    const read = (after: number) =>
      sql<SignalRow & { readonly run_status: string | null }>`SELECT c.seq, c.command_id, c.run_id, c.payload_json,
          c.wait_token, c.state, c.principal_json, r.status AS run_status
        FROM control_signal_commands c LEFT JOIN flows_runs r ON r.run_id = c.run_id
        WHERE c.state = 'pending' AND c.seq > ${after} ${bound === undefined ? sql`` : sql`AND c.seq <= ${bound}`}
        ORDER BY c.seq LIMIT 100`
    let rows = yield* read(cursor)
    if (rows.length === 0 && cursor !== 0) {
      cursor = 0
      rows = yield* read(0)
    }
    cursor = rows.length === 0 ? 0 : Number(rows.at(-1)!.seq)
    const out: Array<SignalCommand> = []
    const finished = new Set<string>()
    for (const row of rows) {
      // Commands of a run that finished without settling them (rows written before runs settled their
      // inbox, or a run finished outside control) would be offered forever: settle them `terminal`.
      if (isFinishedStoreStatus(row.run_status)) {
        if (!finished.has(row.run_id)) yield* settleFinished(row.run_id)
        finished.add(row.run_id)
        continue
      }
      const command = commandOf(row)
      if (command === undefined) yield* quarantine(row)
      else out.push(command)
    }
    return out
  }).pipe(persist("read pending signals"))

  const signalCommands = (query: SignalQuery) =>
    Effect.gen(function*() {
      const limit = yield* checkSignalQuery(query)
      const conditions = [
        query.runId === undefined ? undefined : sql`run_id = ${query.runId}`,
        query.name === undefined
          ? undefined
          : sql`(CASE WHEN ${Dialect.jsonValid(sql, sql`payload_json`)} THEN ${Dialect.jsonText(sql, sql`payload_json`, "$.name")} END) = ${query.name}`,
        query.waitToken === undefined
          ? undefined
          : query.waitToken === null
          ? sql`wait_token IS NULL`
          : sql`wait_token = ${query.waitToken}`,
        query.state === undefined ? undefined : sql`state = ${query.state}`
      ].filter((c) => c !== undefined)
      const where = conditions.length === 0 ? sql`` : sql`WHERE ${sql.and(conditions)}`
      // Undecodable rows are skipped, so read in batches until the page is full.
      const out: Array<SignalCommand> = []
      let after = 0
      for (;;) {
        const rows = yield* sql<SignalRow>`SELECT ${columns} FROM control_signal_commands ${where}
          ${conditions.length === 0 ? sql`WHERE` : sql`AND`} seq > ${after} ORDER BY seq LIMIT ${limit}`.pipe(
          persist("query signal commands")
        )
        for (const row of rows) {
          const command = commandOf(row)
          if (command !== undefined) out.push(command)
          if (out.length === limit) return out
        }
        if (rows.length < limit) return out
        after = Number(rows.at(-1)!.seq)
      }
    })

  const bindSignal = (commandId: string, token: string) =>
    Effect.gen(function*() {
      const row = yield* readCommand(commandId).pipe(persist("bind a signal"))
      if (row === undefined) {
        return yield* Effect.fail(new PersistenceError({ operation: "bind a signal", message: `No pending signal command ${commandId}` }))
      }
      return yield* ctx.write(
        row.run_id,
        "bind a signal",
        Effect.gen(function*() {
          // A savepoint keeps a PostgreSQL transaction usable after the unique index refuses a racing bind.
          yield* sql.withTransaction(
            sql`UPDATE control_signal_commands SET wait_token = ${token}
              WHERE command_id = ${commandId} AND wait_token IS NULL AND state = 'pending'
                AND NOT EXISTS (SELECT 1 FROM control_signal_commands o WHERE o.wait_token = ${token})`
          ).pipe(Effect.catchIf((e) => DurableWriter.codeOf(e) === "constraint", () => Effect.void))
          const current = yield* readCommand(commandId)
          return current?.wait_token ?? null
        })
      )
    })

  const settleSignal = (commandId: string, state: "delivered" | "rejected" | "terminal") =>
    Effect.gen(function*() {
      const row = yield* readCommand(commandId).pipe(persist("settle a signal"))
      if (row === undefined) return
      yield* ctx.write(
        row.run_id,
        "settle a signal",
        sql`UPDATE control_signal_commands SET state = ${state} WHERE command_id = ${commandId} AND state = 'pending'`
      )
    })

  const deliveredSignals = (runId: string) =>
    Effect.gen(function*() {
      yield* runExists(ctx, runId)
      const legacy = yield* sql<{ payload_json: string }>`SELECT payload_json FROM control_run_messages
        WHERE run_id = ${runId} AND kind = 'signal' ORDER BY seq`.pipe(persist("read delivered signals"))
      const commands = yield* sql<SignalRow>`SELECT ${columns} FROM control_signal_commands
        WHERE run_id = ${runId} AND state <> 'rejected' ORDER BY seq`.pipe(persist("read delivered signals"))
      const out: Array<SignalPayload> = []
      for (const row of legacy) {
        const decoded = decodeMessageSignal(row.payload_json, `run ${runId} message`)
        if (Either.isLeft(decoded)) return yield* Effect.fail(decoded.left)
        out.push(decoded.right)
      }
      for (const row of commands) {
        const command = commandOf(row)
        if (command !== undefined) out.push(command.signal)
      }
      return out
    })

  const appendMessage = (runId: string, kind: "signal" | "steer", payload: unknown, operation: string) =>
    Effect.gen(function*() {
      yield* runExists(ctx, runId)
      return yield* ctx.write(
        runId,
        operation,
        Effect.gen(function*() {
          const seq = yield* Sequences.value(ctx, "message")
          const [row] = yield* sql<{ readonly seq: number | string }>`INSERT INTO control_run_messages (seq, run_id, kind, payload_json)
            VALUES (${seq}, ${runId}, ${kind}, ${JSON.stringify(payload)}) RETURNING seq`
          return Number(row!.seq)
        })
      )
    })

  const deliverSignal = (runId: string, signal: SignalPayload) =>
    Effect.zipRight(checkSignal({ runId }, signal), Effect.asVoid(appendMessage(runId, "signal", signal, "deliver a signal")))

  const appendSteer = (runId: string, message: SteerMessage) =>
    Effect.zipRight(checkSteer(runId, message), appendMessage(runId, "steer", message, "append a steer"))

  const steers = (runId: string, after?: number) =>
    Effect.gen(function*() {
      yield* runExists(ctx, runId)
      const from = (yield* checkOrdinal("after", after).pipe(
        Effect.mapError((e) => new PersistenceError({ operation: "read steers", message: e.issue }))
      )) ?? 0
      const rows = yield* sql<{ seq: number; payload_json: string }>`SELECT seq, payload_json FROM control_run_messages
        WHERE run_id = ${runId} AND kind = 'steer' AND seq > ${from} ORDER BY seq`.pipe(persist("read steers"))
      return yield* Effect.forEach(rows, (row) => {
        const decoded = decodeSteer(row.payload_json, `run ${runId} steer ${Number(row.seq)}`)
        return Either.isRight(decoded) ? Effect.succeed({ seq: Number(row.seq), message: decoded.right }) : Effect.fail(decoded.left)
      })
    })

  const requestResume = (runId: string, options?: { readonly consent?: number | undefined }) =>
    Effect.gen(function*() {
      const row = yield* requireRow(ctx, runId)
      const summary = yield* summaryOf(row)
      if (isTerminalStatus(summary.status)) {
        return yield* Effect.fail(new InvalidInput({ issue: `run ${runId} is ${summary.status} and cannot take a resume` }))
      }
      const consent = yield* checkOrdinal("consent", options?.consent)
      const at = yield* ctx.now
      return yield* ctx.write(
        runId,
        "request a resume",
        Effect.gen(function*() {
          const seq = yield* Sequences.value(ctx, "resume")
          const [row] = yield* sql<{ readonly requested_seq: number | string }>`INSERT INTO control_run_resumes
              (run_id, requested_seq, requested_at_ms, consent_seq)
            VALUES (${runId}, ${seq}, ${at}, ${consent ?? null})
            ON CONFLICT (run_id) DO UPDATE SET requested_seq = excluded.requested_seq,
              requested_at_ms = excluded.requested_at_ms,
              consent_seq = COALESCE(excluded.consent_seq, control_run_resumes.consent_seq)
            RETURNING requested_seq`
          return Number(row!.requested_seq)
        })
      )
    })

  const pendingResumes = sql<{ run_id: string; requested_seq: number; requested_at_ms: number; consent_seq: number | null }>`
    SELECT rr.run_id, rr.requested_seq, rr.requested_at_ms, rr.consent_seq
    FROM control_run_resumes rr JOIN flows_runs r ON r.run_id = rr.run_id
    WHERE r.status NOT IN ('completed', 'failed', 'cancelled')
    ORDER BY rr.requested_seq`.pipe(
    persist("read pending resumes"),
    Effect.map((rows): ReadonlyArray<PendingResume> =>
      rows.map((r) => ({
        runId: r.run_id,
        sequence: Number(r.requested_seq),
        requestedAtMs: Number(r.requested_at_ms),
        ...(r.consent_seq === null ? {} : { consent: Number(r.consent_seq) })
      }))
    )
  )

  const clearResume = (runId: string, sequence: number) =>
    ctx.write(runId, "clear a resume", sql`DELETE FROM control_run_resumes WHERE run_id = ${runId} AND requested_seq = ${sequence}`)
      .pipe(Effect.asVoid)

  const readMutation = (key: string) =>
    sql<{ fingerprint: string; receipt_json: string }>`SELECT fingerprint, receipt_json FROM control_mutations
      WHERE mutation_key = ${key}`.pipe(Effect.map((rows) => rows[0]))

  const receiptOf = (key: string, text: string) => {
    const decoded = decodeReceipt(text, `key ${key}`)
    return Either.isRight(decoded) ? Effect.succeed(decoded.right) : Effect.fail(decoded.left)
  }

  const lookupMutation = (key: string, fingerprint: string) =>
    Effect.gen(function*() {
      const prior = yield* readMutation(key).pipe(persist("look up a mutation"))
      if (prior === undefined) return undefined
      if (prior.fingerprint !== fingerprint) {
        return { _tag: "Conflict", message: `idempotency key ${key} was used for another mutation` } as Receipt
      }
      return alreadyApplied(key, yield* receiptOf(key, prior.receipt_json))
    })

  const recordMutation = (key: string, fingerprint: string, receipt: Receipt) =>
    ctx.write(
      undefined,
      "record a mutation",
      Effect.gen(function*() {
        const text = JSON.stringify(receipt)
        yield* sql`INSERT INTO control_mutations (mutation_key, fingerprint, receipt_json) VALUES (${key}, ${fingerprint}, ${text})
          ON CONFLICT (mutation_key) DO NOTHING`
        const held = yield* readMutation(key)
        if (held === undefined || held.fingerprint !== fingerprint || held.receipt_json !== text) {
          return yield* Effect.fail(
            new PersistenceError({ operation: "record a mutation", message: `idempotency key ${key} already holds another receipt` })
          )
        }
      })
    )

  const claimRunKey = (key: string, fingerprint: string) =>
    ctx.write(
      undefined,
      "claim a run key",
      Effect.gen(function*() {
        const claimant = globalThis.crypto.randomUUID()
        yield* sql`INSERT INTO control_run_keys (idempotency_key, fingerprint, claimant) VALUES (${key}, ${fingerprint}, ${claimant})
          ON CONFLICT (idempotency_key) DO NOTHING`
        const holder = (yield* sql<{ fingerprint: string; claimant: string }>`SELECT fingerprint, claimant FROM control_run_keys
          WHERE idempotency_key = ${key}`)[0]
        if (holder === undefined) {
          return yield* Effect.fail(new PersistenceError({ operation: "claim a run key", message: `run key ${key} vanished` }))
        }
        if (holder.fingerprint !== fingerprint) {
          return yield* Effect.fail(new InvalidInput({ issue: `idempotency key ${key} was used for another run` }))
        }
        if (holder.claimant === claimant) return { _tag: "Claimed" } as RunKeyClaim
        const receipt = yield* readMutation(key)
        if (receipt === undefined || receipt.fingerprint !== fingerprint) {
          return yield* Effect.fail(new PersistenceError({ operation: "claim a run key", message: `run key ${key} has no matching receipt` }))
        }
        return { _tag: "Raced", receipt: yield* receiptOf(key, receipt.receipt_json) } as RunKeyClaim
      })
    )

  const releaseRunKey = (key: string) =>
    ctx.write(undefined, "release a run key", sql`DELETE FROM control_run_keys WHERE idempotency_key = ${key}`).pipe(Effect.asVoid)

  return {
    admitSignal,
    signalCommand,
    pendingSignals,
    signalCommands,
    bindSignal,
    settleSignal,
    deliveredSignals,
    deliverSignal,
    appendSteer,
    steers,
    requestResume,
    pendingResumes,
    clearResume,
    lookupMutation,
    recordMutation,
    claimRunKey,
    releaseRunKey
  }
}
