/**
 * Assembles the SQL-backed run store from its operation families.
 */
import { Effect } from "effect"
import type { Service } from "../model.js"
import * as Cancel from "./cancel.js"
import * as ClaimMany from "./claimMany.js"
import * as Claims from "./claims.js"
import * as Context from "./context.js"
import * as Heartbeats from "./heartbeats.js"
import * as Lease from "./lease.js"
import * as Reads from "./reads.js"
import * as Released from "./released.js"

export const make = Effect.map(Context.make, (ctx): Service => {
  const lease = Lease.make(ctx)
  const claims = Claims.make(ctx)
  return Object.freeze({
    ...Reads.make(ctx),
    ...Released.make(ctx),
    ...Cancel.make(ctx),
    ...claims,
    ...ClaimMany.make(ctx, { claimAndOwn: claims.claimAndOwn, transitionOwned: lease.transitionOwned }),
    ...lease,
    ...Heartbeats.make(ctx, lease.heartbeat)
  })
})
