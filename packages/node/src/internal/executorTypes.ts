/** Types shared by Run, Step and the executor (kept apart to avoid import cycles). */
import type * as OwnerId from "@baton/journal/OwnerId"
import type { Option } from "effect"

/** Why a drive started. */
export type DriveCause = "launch" | "released" | "takeover" | "delegation" | "signal" | "resume"

/** Why a drive ended. */
export type EndReason =
  | "completed"
  | "failed"
  | "retrying"
  | "parked"
  | "cancelled"
  | "shutdown"
  | "lease-lost"
  | "storage-failed"

/** The `Run` service: the drive a handler runs in. */
export interface RunService {
  readonly runId: string
  readonly flowId: string
  readonly planId: Option.Option<string>
  readonly drive: number
  readonly cause: DriveCause
  readonly owner: OwnerId.OwnerId
}

/** A JSON value. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }
