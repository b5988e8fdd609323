/**
 * Runs `work` on the items in order, `concurrency` at a time. After the first failure no item is
 * started, `onFailure` runs (to abort the ones in flight), and once all have settled that first
 * failure is thrown.
 */
export async function runPool<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<void>,
  onFailure: () => void,
): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (!failure && next < items.length) {
      const item = items[next++] as T;
      try {
        await work(item);
      } catch (error) {
        if (!failure) {
          failure = { error };
          onFailure();
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
  if (failure) throw failure.error;
}
