// Log text as lines with levels, grown by appended chunks (a chunk may end mid-line), and the
// byte bookkeeping of a tailed file (`TailState`): chunks are placed by their byte offsets, so a
// duplicate or overlapping chunk adds nothing twice, a gap is reported, and a truncated file
// starts the text over.

/** Levels in increasing severity; index 0 is for lines with no level of their own at the start. */
export const LEVELS = ['DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'] as const;
export type Level = (typeof LEVELS)[number];

const LEVEL_ALIASES: Record<string, number> = {
  TRACE: 0, DEBUG: 0, INFO: 1, WARNING: 2, WARN: 2, ERROR: 3, CRITICAL: 4, FATAL: 4,
};

// `[2026-12-02 15:12:22] INFO (nni.xxx ...) message`
const LINE = /^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s+([A-Z]+)\b/;

/** The level a line starts with, or -1 if it has none (a continuation, e.g. a traceback). */
export function lineLevel(line: string): number {
  const m = LINE.exec(line);
  if (!m) return -1;
  const level = LEVEL_ALIASES[m[1]];
  return level === undefined ? -1 : level;
}

export class LogLines {
  lines: string[] = [];
  /** The level of each line; a line without one takes the level of the line before it. */
  levels: number[] = [];
  /** An unfinished last line (no newline yet), shown but not final. */
  partial = '';
  /** Lines dropped from the start to stay within `maxLines`. */
  dropped = 0;
  version = 0;

  constructor(private maxLines = 200_000) {}

  reset(): void {
    this.lines = [];
    this.levels = [];
    this.partial = '';
    this.dropped = 0;
    this.version++;
  }

  append(text: string): void {
    if (!text) return;
    const parts = (this.partial + text).split('\n');
    this.partial = parts.pop() ?? '';
    for (let line of parts) {
      if (line.endsWith('\r')) line = line.slice(0, -1);
      let level = lineLevel(line);
      if (level < 0) level = this.levels.length ? this.levels[this.levels.length - 1] : 1;
      this.lines.push(line);
      this.levels.push(level);
    }
    if (this.lines.length > this.maxLines) {
      const extra = this.lines.length - this.maxLines;
      this.lines.splice(0, extra);
      this.levels.splice(0, extra);
      this.dropped += extra;
    }
    this.version++;
  }

  /** Lines and the partial last line, as shown. */
  count(): number {
    return this.lines.length + (this.partial ? 1 : 0);
  }

  line(i: number): string {
    return i < this.lines.length ? this.lines[i] : this.partial;
  }

  levelOf(i: number): number {
    if (i < this.levels.length) return this.levels[i];
    const own = lineLevel(this.partial);
    return own >= 0 ? own : this.levels.length ? this.levels[this.levels.length - 1] : 1;
  }

  /** Indexes of the lines at `minLevel` or above that contain `text` (case-insensitive). */
  select(minLevel: number, text: string): number[] | null {
    const needle = text.trim().toLowerCase();
    if (minLevel <= 0 && !needle) return null; // everything
    const out: number[] = [];
    const n = this.count();
    for (let i = 0; i < n; i++) {
      if (this.levelOf(i) < minLevel) continue;
      if (needle && !this.line(i).toLowerCase().includes(needle)) continue;
      out.push(i);
    }
    return out;
  }
}

export type TailResult =
  | { kind: 'append'; text: string }
  | { kind: 'reset'; text: string }
  | { kind: 'none' }
  | { kind: 'gap'; from: number; to: number };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Where a tailed file has been read up to (`next`, in bytes), and what a new chunk adds. */
export class TailState {
  next: number | null = null;

  /**
   * Places the chunk [offset, next) of the file. `requested` is the offset asked for, when the
   * chunk answers a request (a chunk from 0 when more was asked means the file was truncated).
   */
  accept(chunk: { offset: number; next: number; text: string }, requested?: number): TailResult {
    const { offset, next, text } = chunk;
    if (this.next === null) {
      this.next = next;
      return { kind: 'reset', text };
    }
    if (requested !== undefined && requested > 0 && offset === 0 && offset < requested) {
      this.next = next;
      return { kind: 'reset', text };
    }
    if (offset === 0 && this.next > 0) {
      // the file was truncated and is read from its start again
      this.next = next;
      return { kind: 'reset', text };
    }
    if (offset === this.next) {
      this.next = next;
      return text ? { kind: 'append', text } : { kind: 'none' };
    }
    if (offset > this.next) return { kind: 'gap', from: this.next, to: offset };
    if (next <= this.next) return { kind: 'none' }; // already have it
    // overlapping: keep the bytes past what we have
    const bytes = encoder.encode(text);
    const skip = this.next - offset;
    this.next = next;
    const rest = skip < bytes.length ? decoder.decode(bytes.subarray(skip)) : '';
    return rest ? { kind: 'append', text: rest } : { kind: 'none' };
  }
}
