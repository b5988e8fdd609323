export interface Progress {
  /** Bytes sent (or already stored, for a resumed upload); never goes down. */
  loaded: number;
  total: number;
}

export type ProgressListener = (progress: Progress) => void;

export interface ProgressTracker {
  /** Reports the bytes already in place (0, or what a resumed upload finds stored). */
  start(stored: number): void;
  /** The listener of one part's body: its bytes sent so far (restarting at 0 on a retry). */
  part(partNumber: number): (loaded: number) => void;
  done(): void;
}

/**
 * Sums the parts in flight. A retried part starts again at 0; the total reported waits until the
 * bytes sent pass it again, so listeners see a value that only grows.
 */
export function progressTracker(total: number, listener: ProgressListener | undefined): ProgressTracker {
  const parts = new Map<number, number>();
  let sum = 0;
  let reported = -1;
  const emit = () => {
    if (sum <= reported) return;
    reported = sum;
    listener?.({ loaded: sum, total });
  };
  return {
    start(stored) {
      sum = stored;
      emit();
    },
    part: (partNumber) => (loaded) => {
      sum += loaded - (parts.get(partNumber) ?? 0);
      parts.set(partNumber, loaded);
      emit();
    },
    done() {
      sum = total;
      emit();
    },
  };
}
