/**
 * The bytes of the test file, from a seed: the page makes its File from them (again, identical,
 * after a reload), and the test computes their SHA-256 in Node.js without shipping 24 MiB to the page.
 */
export function seededBytes(seed: number, size: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size);
  const words = new Uint32Array(bytes.buffer, 0, size >>> 2);
  // xorshift32: its state must never be 0.
  let state = seed >>> 0 || 0x9e3779b9;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
  for (let i = 0; i < words.length; i++) words[i] = next();
  for (let i = words.length * 4; i < size; i++) bytes[i] = next() & 0xff;
  return bytes;
}
