/**
 * The indexer's per-file hashing routine, shared by the flow and the plain loop
 * the benchmark compares it with: SHA-256 over 64 KiB chunks, yielding between chunks, with a `stat`
 * before and after so a file that changed while indexed is reported as such.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as nodePath from "node:path"
import type { ListedFile } from "./batches.js"

/**
 * The indexed state of one file. `sha256` is null for `missing` and `unreadable`; `changed` keeps the
 * new size and mtime and the hash of what was read.
 *
 * @since 0.1.0
 * @category models
 */
export interface FileResult {
  readonly path: string
  readonly size: number
  readonly mtimeMs: number
  readonly sha256: string | null
  readonly status: "ok" | "missing" | "unreadable" | "changed"
}

/**
 * Chunk size of one read, in bytes.
 *
 * @since 0.1.0
 * @category constants
 */
export const chunkBytes = 64 * 1024

const isMissing = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "code" in error &&
  ((error as { code: unknown }).code === "ENOENT" || (error as { code: unknown }).code === "ENOTDIR")

/**
 * Hashes one listed file under `root`. Never fails: problems become the result's `status`.
 *
 * @since 0.1.0
 * @category hashing
 */
export const hashFile = (root: string, file: ListedFile): Effect.Effect<FileResult> =>
  Effect.gen(function*() {
    const absolute = nodePath.join(root, file.path)
    const opened = yield* Effect.promise(() =>
      fs.open(absolute, "r").then(
        (handle) => ({ _tag: "open" as const, handle }),
        (error: unknown) => ({ _tag: isMissing(error) ? "missing" as const : "unreadable" as const })
      )
    )
    if (opened._tag !== "open") {
      return { path: file.path, size: file.size, mtimeMs: file.mtimeMs, sha256: null, status: opened._tag }
    }
    const handle = opened.handle
    return yield* Effect.gen(function*() {
      const before = yield* Effect.promise(() => handle.stat())
      const hash = createHash("sha256")
      const buffer = Buffer.allocUnsafe(chunkBytes)
      let readOk = true
      for (;;) {
        const read = yield* Effect.promise(() =>
          handle.read(buffer, 0, chunkBytes, null).then((r) => r.bytesRead, () => -1)
        )
        if (read < 0) {
          readOk = false
          break
        }
        if (read === 0) break
        hash.update(buffer.subarray(0, read))
        // Long files must not starve the heartbeat or an interrupt.
        yield* Effect.yieldNow()
      }
      const after = yield* Effect.promise(() => fs.stat(absolute).then((s) => s, () => undefined))
      if (!readOk) {
        return { path: file.path, size: file.size, mtimeMs: file.mtimeMs, sha256: null, status: "unreadable" as const }
      }
      if (after === undefined) {
        return { path: file.path, size: file.size, mtimeMs: file.mtimeMs, sha256: null, status: "missing" as const }
      }
      const size = after.size
      const mtimeMs = Math.floor(after.mtimeMs)
      const changed = size !== file.size || mtimeMs !== file.mtimeMs || before.size !== size ||
        Math.floor(before.mtimeMs) !== mtimeMs
      return { path: file.path, size, mtimeMs, sha256: hash.digest("hex"), status: changed ? "changed" as const : "ok" as const }
    }).pipe(Effect.ensuring(Effect.promise(() => handle.close().catch(() => undefined))))
  })
