/**
 * Counts what a process sends to its database, at the driver: SQL statements, transactions
 * (`BEGIN`s), write transactions (a transaction with at least one `INSERT`/`UPDATE`/`DELETE`, or
 * one such statement sent alone in autocommit) and, on PostgreSQL, round trips (calls of node-postgres' `Client.prototype.query`,
 * which the pool's clients share). It patches the driver prototypes, so it sees every
 * statement the stores issue, transaction control included (the transaction driver sends
 * `BEGIN`/`COMMIT` on the raw connection, past `@effect/sql`'s statement transformers).
 * For the bench and the torture only: install it before the database layer is built.
 */
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
// The drivers as the database package loads them, so the patched prototypes are the ones it uses.
const requireFromDatabase = createRequire(path.join(repoRoot, "packages", "database", "package.json"))

/** Running totals since the process installed the counter. */
export interface Counts {
  readonly statements: number
  readonly transactions: number
  readonly writeTransactions: number
  readonly roundTrips: number
}

const totals = { statements: 0, transactions: 0, writeTransactions: 0, roundTrips: 0 }

/** A copy of the totals now. */
export const snapshot = (): Counts => ({ ...totals })

/** `after − before`, field by field. */
export const diff = (before: Counts, after: Counts): Counts => ({
  statements: after.statements - before.statements,
  transactions: after.transactions - before.transactions,
  writeTransactions: after.writeTransactions - before.writeTransactions,
  roundTrips: after.roundTrips - before.roundTrips
})

/** The totals added by running `body`. */
export const around = async <A>(body: () => Promise<A>): Promise<readonly [A, Counts]> => {
  const before = snapshot()
  const value = await body()
  return [value, diff(before, snapshot())] as const
}

/**
 * Statements in one SQL text: a parameterised query is one; a simple query (no parameters, as
 * the PostgreSQL opening script is sent) is split on `;` outside quotes.
 */
export const statementsIn = (text: string, parameterised: boolean): ReadonlyArray<string> => {
  if (parameterised) return [text]
  const parts: Array<string> = []
  let current = ""
  let quote: string | undefined
  for (const ch of text) {
    if (quote !== undefined) {
      if (ch === quote) quote = undefined
    } else if (ch === "'" || ch === "\"") {
      quote = ch
    } else if (ch === ";") {
      if (current.trim() !== "") parts.push(current)
      current = ""
      continue
    }
    current += ch
  }
  if (current.trim() !== "") parts.push(current)
  return parts
}

const patterns: Array<{ readonly pattern: RegExp; count: number }> = []

/**
 * Counts, from now on, the statements whose text matches `pattern` (e.g. one kind of write
 * among the others a process sends); the returned function reads the count.
 */
export const matching = (pattern: RegExp): (() => number) => {
  const entry = { pattern, count: 0 }
  patterns.push(entry)
  return () => entry.count
}

const listeners: Array<(statement: string, connection: object) => void> = []

/**
 * Calls `listener` with the text of every statement counted from now on (to see which ones an idle process
 * sends), and the connection (driver object) it is sent on, as it is sent: before it runs.
 */
export const onStatement = (listener: (statement: string, connection: object) => void): void => {
  listeners.push(listener)
}

const writes = /^\s*(INSERT|UPDATE|DELETE|REPLACE)\b|^\s*WITH\b[\s\S]*\b(INSERT|UPDATE|DELETE)\b/i

/** Per connection: inside a transaction, and whether it has written yet. */
const sessions = new WeakMap<object, { open: boolean; wrote: boolean }>()

const record = (connection: object, text: string, parameterised: boolean) => {
  let session = sessions.get(connection)
  if (session === undefined) sessions.set(connection, session = { open: false, wrote: false })
  for (const statement of statementsIn(text, parameterised)) {
    totals.statements++
    for (const listener of listeners) listener(statement, connection)
    if (/^\s*BEGIN\b/i.test(statement)) {
      totals.transactions++
      session.open = true
      session.wrote = false
    } else if (/^\s*(COMMIT|ROLLBACK|END)\s*$/i.test(statement)) {
      if (session.open && session.wrote) totals.writeTransactions++
      session.open = false
    } else if (writes.test(statement)) {
      if (session.open) session.wrote = true
      else totals.writeTransactions++
    }
    for (const entry of patterns) if (entry.pattern.test(statement)) entry.count++
  }
}

let sqliteInstalled = false
let pgInstalled = false

/** Patch better-sqlite3: every `run`/`all`/`get`/`iterate` of a prepared statement counts. */
export const installSqlite = (): void => {
  if (sqliteInstalled) return
  sqliteInstalled = true
  const Database = requireFromDatabase("better-sqlite3")
  const probe = new Database(":memory:")
  const statementPrototype = Object.getPrototypeOf(probe.prepare("SELECT 1"))
  probe.close()
  for (const method of ["run", "all", "get", "iterate"] as const) {
    const original = statementPrototype[method]
    statementPrototype[method] = function(this: { readonly source: string; readonly database: object }, ...args: Array<unknown>) {
      record(this.database, this.source, true)
      return original.apply(this, args)
    }
  }
  const exec = Database.prototype.exec
  Database.prototype.exec = function(this: object, text: string) {
    record(this, text, false)
    return exec.call(this, text)
  }
}

/** Patch node-postgres: every `Client.prototype.query` call is one round trip. */
export const installPg = (): void => {
  if (pgInstalled) return
  pgInstalled = true
  const pg = requireFromDatabase("pg")
  const query = pg.Client.prototype.query
  pg.Client.prototype.query = function(this: object, config: unknown, values?: unknown, callback?: unknown) {
    const text = typeof config === "string" ? config : (config as { text?: unknown } | null)?.text
    const params = Array.isArray(values) ? values : (config as { values?: unknown } | null)?.values
    if (typeof text === "string") {
      totals.roundTrips++
      record(this, text, Array.isArray(params) && params.length > 0)
    }
    return query.call(this, config, values, callback)
  }
}
