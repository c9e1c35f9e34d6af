/**
 * Set by `Companion.append` around its emit: the one path where a durable emit
 * joins the caller's write without a savepoint (a fact belongs to the write that
 * states it). Any other emit, companion ids included, keeps its savepoint, so a
 * caller may catch its typed failure inside `transact`.
 *
 * @internal
 */
import * as FiberRef from "effect/FiberRef"

/** @internal */
export const joinWithoutSavepoint: FiberRef.FiberRef<boolean> = FiberRef.unsafeMake(false)
