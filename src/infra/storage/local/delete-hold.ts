/**
 * Lets deletions wait while something reads the objects as they stand (a backup copying them after
 * its database snapshot): a deletion that comes meanwhile runs once every hold is released.
 */
export class DeleteHold {
  #holds = 0;
  #released: Promise<void> = Promise.resolve();
  #release = () => {};

  /** Holds deletions until the returned function is called (calling it again does nothing). */
  hold(): () => void {
    if (this.#holds++ === 0) {
      this.#released = new Promise((resolve) => {
        this.#release = resolve;
      });
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.#holds === 0) this.#release();
    };
  }

  /** Resolves when no hold is left. */
  async released(): Promise<void> {
    while (this.#holds > 0) await this.#released;
  }
}
