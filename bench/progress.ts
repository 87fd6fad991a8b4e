/**
 * Progress of a cell while it runs. On a terminal: one line redrawn in place (`\r`) with a bar, turns
 * done / total, errors and elapsed time, replaced by the cell's summary line when it ends. Elsewhere (CI,
 * a log file): a plain line every few seconds, and none for a cell shorter than that.
 *
 * Why no library: one line per cell is ~20 lines of `\r`; cli-progress would bring its own multi-bar
 * layout and terminal handling for nothing we need.
 */
export interface CellProgress {
  update(done: number, errors: number): void;
  /** The cell ended: the live line is cleared (the caller logs the summary). */
  done(): void;
}

export type ProgressFactory = (label: string, total: number) => CellProgress;

export const noProgress: ProgressFactory = () => ({ update: () => undefined, done: () => undefined });

export interface ProgressState {
  label: string;
  done: number;
  total: number;
  errors: number;
  elapsedMs: number;
}

/** `  plain durable c=32 [#########-----------]  30/64 turns  0 errors  4.1 s` (bar only when width > 0). */
export function progressLine(p: ProgressState, barWidth = 20): string {
  const frac = p.total > 0 ? Math.min(1, p.done / p.total) : 0;
  const filled = Math.round(frac * barWidth);
  const bar = barWidth > 0 ? ` [${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}]` : '';
  const width = String(p.total).length;
  return `  ${p.label}${bar} ${String(p.done).padStart(width)}/${p.total} turns  ${p.errors} error${p.errors === 1 ? '' : 's'}  ${(p.elapsedMs / 1000).toFixed(1)} s`;
}

export interface ProgressOutput {
  isTTY?: boolean;
  columns?: number;
  write(chunk: string): unknown;
}

/** Live progress on `out` (a TTY: redrawn at most every 100 ms; else a line every `plainEveryMs`). */
export function progressTo(out: ProgressOutput, opts: { plainEveryMs?: number; now?: () => number } = {}): ProgressFactory {
  const now = opts.now ?? Date.now;
  const plainEveryMs = opts.plainEveryMs ?? 10_000;
  return (label, total) => {
    const t0 = now();
    let last = t0;
    let shown = false;
    const state = (done: number, errors: number): ProgressState => ({ label, done, total, errors, elapsedMs: now() - t0 });
    if (out.isTTY) {
      const draw = (done: number, errors: number) => {
        const line = progressLine(state(done, errors));
        // Never wrap: a wrapped line cannot be redrawn in place.
        out.write(`\r\x1b[2K${out.columns ? line.slice(0, out.columns - 1) : line}`);
        shown = true;
      };
      draw(0, 0);
      return {
        update: (done, errors) => {
          if (done < total && now() - last < 100) return;
          last = now();
          draw(done, errors);
        },
        done: () => {
          if (shown) out.write('\r\x1b[2K');
        },
      };
    }
    return {
      update: (done, errors) => {
        if (now() - last < plainEveryMs || done >= total) return;
        last = now();
        out.write(`${progressLine(state(done, errors), 0)}\n`);
      },
      done: () => undefined,
    };
  };
}
