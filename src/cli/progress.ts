/**
 * Progress of file transfers: a bar per file (cli-progress) on a terminal; on anything else (a pipe,
 * a log, CI) one plain line per file when it is done, so the output stays readable.
 */
import cliProgress from 'cli-progress';
import { formatBytes } from './table.ts';

export interface Bar {
  update(bytes: number): void;
  /** The transfer ended; `note` is shown beside it (e.g. the file id). */
  done(note: string): void;
}

export interface Bars {
  add(name: string, total: number): Bar;
  stop(): void;
}

/** `show` false: nothing at all (the output is JSON). */
export function progressBars(show: boolean, stream: NodeJS.WriteStream = process.stdout): Bars {
  if (!show || !stream.isTTY) {
    return {
      add: (name, total) => ({
        update() {},
        done: (note) => {
          if (show) stream.write(`${name}  ${formatBytes(total)}  ${note}\n`);
        },
      }),
      stop() {},
    };
  }
  const multi = new cliProgress.MultiBar(
    {
      stream,
      format: '{name} [{bar}] {percentage}% {moved}/{size} {note}',
      hideCursor: true,
      clearOnComplete: false,
      autopadding: true,
    },
    cliProgress.Presets.shades_classic,
  );
  return {
    add(name, total) {
      const size = formatBytes(total);
      const bar = multi.create(Math.max(total, 1), 0, { name, size, moved: formatBytes(0), note: '' });
      return {
        update: (bytes) => bar.update(bytes, { moved: formatBytes(bytes) }),
        done: (note) => bar.update(Math.max(total, 1), { moved: size, note }),
      };
    },
    stop: () => multi.stop(),
  };
}
