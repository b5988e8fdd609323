/**
 * Collects items and hands them to `flush` together once the current turn of the event loop is over:
 * what many callers add in one turn crosses (a message, a statement) as one.
 */
export function perTurn<T>(flush: (items: T[]) => void): (item: T) => void {
  let items: T[] = [];
  return (item) => {
    if (items.length === 0) {
      setImmediate(() => {
        const batch = items;
        items = [];
        flush(batch);
      });
    }
    items.push(item);
  };
}
