/**
 * Runs `scripts/lib/count-lifecycle.ts` (the bench's driver-level counter) in its own process and
 * answers its per-operation counts of statements, transactions and PostgreSQL round trips.
 */
import { completion, spawnFixture } from "../../../database/test/support/processes.js"

const counter = new URL("../../../../scripts/lib/count-lifecycle.ts", import.meta.url)

export interface Counts {
  readonly statements: number
  readonly transactions: number
  readonly roundTrips: number
}
export type Lifecycle = Record<"create" | "claimAndOwn" | "heartbeat" | "transitionOwned", Counts>

export const countLifecycle = async (args: ReadonlyArray<string>): Promise<Lifecycle> => {
  const done = await completion(spawnFixture(counter, args, { env: { PGOPTIONS: "--client-min-messages=warning" } }))
  const line = done.stdout.split("\n").find((l) => l.startsWith("{"))
  if (done.code !== 0 || line === undefined) throw new Error(`count-lifecycle failed (${done.code}): ${done.stderr}`)
  return JSON.parse(line)
}
