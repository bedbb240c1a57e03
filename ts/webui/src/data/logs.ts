// Log text as lines with levels, grown by appended chunks (a chunk may end mid-line), and the
// byte bookkeeping of a tailed file (`TailState`): chunks are placed by their byte offsets in
// the file of the log they come from (its inode), so a duplicate or overlapping chunk adds
// nothing twice, a gap is reported, a truncated file starts the text over, and when the log is
// rotated the next file goes on from its start. What the server skipped (it jumps to the end of
// a log it cannot keep up with) is marked in the text with a note line.

/** Levels in increasing severity; index 0 is for lines with no level of their own at the start. */
export const LEVELS = ['DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'] as const;
export type Level = (typeof LEVELS)[number];
/** The level of a note the UI puts among the lines (e.g. what was skipped): above every filter. */
export const NOTE_LEVEL = LEVELS.length;

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
  /** The level of the last line of the log itself (notes have none of their own). */
  private lastLevel = 1;

  constructor(private maxLines = 200_000) {}

  reset(): void {
    this.lines = [];
    this.levels = [];
    this.partial = '';
    this.dropped = 0;
    this.lastLevel = 1;
    this.version++;
  }

  /** Ends the partial line (what follows is not its rest) and adds `text` as a note line. */
  note(text: string): void {
    if (this.partial) this.push(this.partial);
    this.partial = '';
    this.lines.push(text);
    this.levels.push(NOTE_LEVEL);
    this.trim();
    this.version++;
  }

  private push(line: string): void {
    let level = lineLevel(line);
    if (level < 0) level = this.lastLevel;
    this.lastLevel = level;
    this.lines.push(line);
    this.levels.push(level);
  }

  private trim(): void {
    if (this.lines.length > this.maxLines) {
      const extra = this.lines.length - this.maxLines;
      this.lines.splice(0, extra);
      this.levels.splice(0, extra);
      this.dropped += extra;
    }
  }

  append(text: string): void {
    if (!text) return;
    const parts = (this.partial + text).split('\n');
    this.partial = parts.pop() ?? '';
    for (const line of parts) this.push(line.endsWith('\r') ? line.slice(0, -1) : line);
    this.trim();
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
    return own >= 0 ? own : this.lastLevel;
  }

  /** Indexes of the lines at `minLevel` or above that contain `text` (case-insensitive). */
  select(minLevel: number, text: string): number[] | null {
    const needle = text.trim().toLowerCase();
    if (minLevel <= 0 && !needle) return null; // everything
    const out: number[] = [];
    const n = this.count();
    for (let i = 0; i < n; i++) {
      const level = this.levelOf(i);
      if (level < minLevel) continue;
      if (needle && level !== NOTE_LEVEL && !this.line(i).toLowerCase().includes(needle)) continue;
      out.push(i);
    }
    return out;
  }
}

export type TailResult =
  /** `skipped`: bytes of the log the server passed over before `text` (null: an unknown amount). */
  | { kind: 'append'; text: string; skipped?: number | null }
  | { kind: 'reset'; text: string }
  | { kind: 'none' }
  | { kind: 'gap'; from: number; to: number };

/** A chunk of a tailed file as the server sends it (see TailChunk). */
export interface PlacedChunk {
  offset: number;
  next: number;
  size?: number;
  text: string;
  inode?: number | null;
  base?: number;
  skipped?: number | null;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
/** Files of a log remembered as read to their end. */
const FINISHED_KEPT = 64;

function fileKey(inode: number, base: number | undefined): string {
  return `${inode}@${base ?? ''}`;
}

/**
 * Where a tailed log has been read up to: `next` bytes into its file `inode` (the server names
 * the file of each chunk by its inode; `base` is its count of the log's bytes before that file,
 * passed back to it). When the log is rotated the server goes on in the next file from offset 0:
 * that is the text going on, not a truncated file.
 */
export class TailState {
  next: number | null = null;
  inode: number | null = null;
  base: number | null = null;
  /** Files left behind for the next one (inode and base: an inode is given again to a new file):
   *  a late chunk of one of them is old news. */
  private finished: string[] = [];

  /**
   * Places the chunk [offset, next) of the file. `requested` is the offset asked for, when the
   * chunk answers a request (a chunk from 0 of the same file when more was asked means the file
   * was truncated).
   */
  accept(chunk: PlacedChunk, requested?: number): TailResult {
    const { offset, next, text } = chunk;
    const inode = chunk.inode ?? null;
    const skipped = chunk.skipped === undefined ? 0 : chunk.skipped;
    if (this.next === null) {
      this.take(chunk);
      return { kind: 'reset', text };
    }
    const moved = inode !== null && this.inode !== null && inode !== this.inode;
    if (moved && this.finished.includes(fileKey(inode, chunk.base))) return { kind: 'none' };
    if (skipped !== 0) {
      // The server passed over part of the log (a jump to its end, or files rotated away):
      // this chunk goes on from there, in whichever file, unless it is one already had.
      if (!moved && inode === this.inode && offset <= this.next && chunk.base === (this.base ?? undefined)) {
        return next <= this.next ? { kind: 'none' } : this.overlap(chunk);
      }
      this.leave(chunk);
      return { kind: 'append', text, skipped };
    }
    if (moved) {
      if (offset !== 0) return { kind: 'gap', from: this.next, to: offset };
      this.leave(chunk); // the log's next file after a rotation, from its start
      return text ? { kind: 'append', text, skipped: 0 } : { kind: 'none' };
    }
    if (this.inode === null && inode !== null) this.inode = inode; // the log's first file appeared
    if (chunk.base !== undefined) this.base = chunk.base;
    // From 0 of the same file when more was had (or asked for): the file was truncated and is
    // read from its start again, if it is shorter now (else it is the start again: a duplicate).
    const had = Math.max(this.next, requested ?? 0);
    if (offset === 0 && had > 0 && (chunk.size === undefined || chunk.size < had)) {
      this.next = next;
      return { kind: 'reset', text };
    }
    if (offset === this.next) {
      this.next = next;
      return text ? { kind: 'append', text } : { kind: 'none' };
    }
    if (offset > this.next) return { kind: 'gap', from: this.next, to: offset };
    if (next <= this.next) return { kind: 'none' }; // already have it
    return this.overlap(chunk);
  }

  /** The bytes of an overlapping chunk past what we have. */
  private overlap(chunk: PlacedChunk): TailResult {
    const bytes = encoder.encode(chunk.text);
    const skip = this.next! - chunk.offset;
    this.next = chunk.next;
    const rest = skip < bytes.length ? decoder.decode(bytes.subarray(skip)) : '';
    return rest ? { kind: 'append', text: rest } : { kind: 'none' };
  }

  /** Goes on in the file of `chunk`, leaving the one read so far behind. */
  private leave(chunk: PlacedChunk): void {
    if (this.inode !== null) {
      this.finished.push(fileKey(this.inode, this.base ?? undefined));
      if (this.finished.length > FINISHED_KEPT) this.finished.shift();
    }
    this.take(chunk);
  }

  private take(chunk: PlacedChunk): void {
    this.next = chunk.next;
    this.inode = chunk.inode ?? null;
    this.base = chunk.base ?? null;
  }
}
