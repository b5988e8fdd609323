/**
 * Chunks whose memory a writer thread moves away to write them (writer-pool.ts) and that their
 * owner wants back once written, by their ArrayBuffer: the writer hands the memory back instead of
 * freeing it, so that the owner still holds the bytes without a copy of them.
 */
const wanted = new WeakMap<ArrayBuffer, (memory: ArrayBuffer) => void>();

/** Asks for `chunk`'s memory back once written, through `receive`. */
export function wantBack(chunk: Buffer, receive: (memory: ArrayBuffer) => void): void {
  wanted.set(chunk.buffer as ArrayBuffer, receive);
}

/** No longer wants `chunk`'s memory back. */
export function forget(chunk: Buffer): void {
  wanted.delete(chunk.buffer as ArrayBuffer);
}

export const isWanted = (buffer: ArrayBuffer): boolean => wanted.has(buffer);

/** The memory of `original`, moved back: to its owner, or freed at once when nobody wants it any more. */
export function giveBack(original: ArrayBuffer, memory: ArrayBuffer): void {
  const receive = wanted.get(original);
  wanted.delete(original);
  if (receive) receive(memory);
  else memory.transfer(0);
}
