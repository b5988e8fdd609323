import type { Guess } from './known-files.ts';
import type { Renderer } from './renderer.ts';
import type { ServableFile } from './repo.ts';

/** Throws when a request may not have a rendition of `file` (not found, not visible, not ready). */
export type Admit = (file: ServableFile | undefined) => void;

/**
 * Renders started before their file's statement answers, from what this process last read of the
 * file: the statement (half a millisecond on the embedded engine, a round trip on PostgreSQL) then
 * runs while it renders. Their bytes are answered only once a statement admits the file with the
 * same content, and otherwise dropped unstored.
 */
export function createHeadStarts(deps: {
  renderer: Renderer;
  /** Whether a render of `key` is needed by no one: its bytes held in memory, or a render under way. */
  covered: (key: string) => boolean;
}) {
  const { renderer, covered } = deps;
  /**
   * By key, until every request that took one has its answer (it is then made once, or dropped), or
   * until it fails: requests together share one, and a request after a failure renders anew.
   */
  const started = new Map<string, { render: Promise<Buffer>; takers: number }>();

  return {
    /**
     * Takes the render started ahead for a request's guess, starting it when none is: only where the
     * guess shows the caller may have the file and the rendition is known not to be stored, for a
     * request without If-None-Match, and while a render slot is free (it never delays another render).
     * Answers the function that lets it go once the request has its answer, or undefined when none.
     */
    take(guessed: Guess | undefined, ifNoneMatch: string | undefined, admit: Admit) {
      if (!guessed || ifNoneMatch !== undefined) return undefined;
      const { seen, target } = guessed;
      let head = started.get(target.key);
      if (!head) {
        if (!seen.stored || seen.stored.has(target.key) || covered(target.key) || !renderer.slotFree()) {
          return undefined;
        }
        try {
          admit(seen.file);
        } catch {
          return undefined;
        }
        const render = renderer.make(seen.file, target.spec);
        const entry = { render, takers: 0 };
        // Its failure is the answer of the requests that took it, once their statement confirms the file.
        render.catch(() => {
          if (started.get(target.key) === entry) started.delete(target.key);
        });
        head = entry;
        started.set(target.key, head);
      }
      const taken = head;
      taken.takers++;
      return () => {
        if (--taken.takers === 0 && started.get(target.key) === taken) started.delete(target.key);
      };
    },

    /** The render started ahead for `key`, while a request that took it has no answer yet. */
    render: (key: string) => started.get(key)?.render,
  };
}
