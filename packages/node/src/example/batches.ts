/**
 * Greedy, deterministic batching of the indexer's file list (the flow's second step).
 *
 * @since 0.1.0
 */

/**
 * One listed file: a `/`-separated path relative to the root, its size in bytes and mtime in epoch ms.
 *
 * @since 0.1.0
 * @category models
 */
export interface ListedFile {
  readonly path: string
  readonly size: number
  readonly mtimeMs: number
}

/**
 * Cuts `files` in order into batches of at most `maxFiles` files and `maxBytes` bytes; a file larger than
 * `maxBytes` is a batch alone. Replays over the same list give the same batches.
 *
 * @since 0.1.0
 * @category constructors
 */
export const cut = <F extends { readonly size: number }>(
  files: ReadonlyArray<F>,
  maxFiles: number,
  maxBytes: number
): ReadonlyArray<ReadonlyArray<F>> => {
  const batches: Array<Array<F>> = []
  let current: Array<F> = []
  let bytes = 0
  for (const file of files) {
    if (current.length > 0 && (current.length >= maxFiles || bytes + file.size > maxBytes)) {
      batches.push(current)
      current = []
      bytes = 0
    }
    current.push(file)
    bytes += file.size
  }
  if (current.length > 0) batches.push(current)
  return batches
}

/**
 * The step name of batch `index` (1-based) out of `count`: `hash-0001`, zero-padded to the width of the
 * count and at least four digits.
 *
 * @since 0.1.0
 * @category naming
 */
export const stepName = (index: number, count: number): string =>
  `hash-${String(index).padStart(Math.max(4, String(count).length), "0")}`
