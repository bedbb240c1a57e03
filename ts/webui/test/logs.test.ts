import { describe, expect, it } from 'vitest';
import { LogLines, NOTE_LEVEL, TailState, lineLevel } from '../src/data/logs';

describe('log levels', () => {
  it('reads the level of a log line', () => {
    expect(lineLevel('[2026-12-02 15:12:22] INFO (nni.runtime) started')).toBe(1);
    expect(lineLevel('[2026-12-02 15:12:22] WARNING (x) hm')).toBe(2);
    expect(lineLevel('[2026-12-02 15:12:22] ERROR (x) bad')).toBe(3);
    expect(lineLevel('[2026-12-02 15:12:22] DEBUG (x) detail')).toBe(0);
    expect(lineLevel('Traceback (most recent call last):')).toBe(-1);
  });

  it('gives continuation lines the level of the line before and filters by level and text', () => {
    const log = new LogLines();
    log.append('[2026-12-02 15:12:22] INFO (a) one\n[2026-12-02 15:12:23] ERROR (a) two\nTraceback:\n  File x\n');
    log.append('[2026-12-02 15:12:24] DEBUG (a) three\n[2026-12-02 15:12:25] WARN');
    expect(log.levels).toEqual([1, 3, 3, 3, 0]);
    expect(log.count()).toBe(6); // the partial last line is shown
    expect(log.select(3, '')).toEqual([1, 2, 3]);
    expect(log.select(2, '')).toEqual([1, 2, 3, 5]);
    expect(log.select(0, 'three')).toEqual([4]);
    expect(log.select(0, '')).toBeNull();
    log.append('ING (a) four\n');
    expect(log.lines[5]).toBe('[2026-12-02 15:12:25] WARNING (a) four');
    expect(log.partial).toBe('');
  });

  it('drops the oldest lines past its limit', () => {
    const log = new LogLines(3);
    log.append('a\nb\nc\nd\ne\n');
    expect(log.lines).toEqual(['c', 'd', 'e']);
    expect(log.dropped).toBe(2);
  });
});

describe('TailState', () => {
  it('appends adjacent chunks and ignores duplicates', () => {
    const tail = new TailState();
    expect(tail.accept({ offset: 0, next: 3, text: 'abc' })).toEqual({ kind: 'reset', text: 'abc' });
    expect(tail.accept({ offset: 3, next: 5, text: 'de' })).toEqual({ kind: 'append', text: 'de' });
    expect(tail.accept({ offset: 3, next: 5, text: 'de' })).toEqual({ kind: 'none' });
    expect(tail.next).toBe(5);
  });

  it('keeps only the new part of an overlapping chunk (bytes, not characters)', () => {
    const tail = new TailState();
    tail.accept({ offset: 0, next: 4, text: 'aé ' }); // é is two bytes
    expect(tail.accept({ offset: 1, next: 7, text: 'é xyz' })).toEqual({ kind: 'append', text: 'xyz' });
    expect(tail.next).toBe(7);
  });

  it('reports a gap and restarts on a truncated file', () => {
    const tail = new TailState();
    tail.accept({ offset: 100, next: 110, text: '0123456789' });
    expect(tail.accept({ offset: 120, next: 130, text: 'x' })).toEqual({ kind: 'gap', from: 110, to: 120 });
    expect(tail.accept({ offset: 0, next: 4, text: 'new\n' })).toEqual({ kind: 'reset', text: 'new\n' });
    expect(tail.next).toBe(4);
    // a REST answer from 0 to a request from further on: truncated too
    expect(tail.accept({ offset: 0, next: 2, text: 'ab' }, 4)).toEqual({ kind: 'reset', text: 'ab' });
  });
});

describe('TailState across rotations', () => {
  it('goes on in the next file from its start, never starting over or repeating', () => {
    const tail = new TailState();
    expect(tail.accept({ offset: 0, next: 4, size: 4, text: 'a\nb\n', inode: 7, base: 0 }).kind).toBe('reset');
    expect(tail.accept({ offset: 4, next: 6, size: 6, text: 'c\n', inode: 7, base: 0 })).toEqual({ kind: 'append', text: 'c\n' });
    // rotated: stdout (inode 7) became stdout.1, a new stdout (inode 9) starts at 0
    expect(tail.accept({ offset: 0, next: 2, size: 2, text: 'd\n', inode: 9, base: 6 }))
      .toEqual({ kind: 'append', text: 'd\n', skipped: 0 });
    expect([tail.inode, tail.next, tail.base]).toEqual([9, 2, 6]);
    // the same start again (a REST read and a push of it): nothing, and not a truncation
    expect(tail.accept({ offset: 0, next: 2, size: 3, text: 'd\n', inode: 9, base: 6 })).toEqual({ kind: 'none' });
    // a late chunk of the file left behind: old news
    expect(tail.accept({ offset: 4, next: 6, size: 6, text: 'c\n', inode: 7, base: 0 })).toEqual({ kind: 'none' });
    expect(tail.accept({ offset: 2, next: 4, size: 4, text: 'e\n', inode: 9, base: 6 })).toEqual({ kind: 'append', text: 'e\n' });
  });

  it('takes a jump to the end with the bytes skipped, and asks for a gap in another file', () => {
    const tail = new TailState();
    tail.accept({ offset: 0, next: 2, size: 2, text: 'a\n', inode: 1 });
    expect(tail.accept({ offset: 5000, next: 5002, size: 5002, text: 'z\n', inode: 1, skipped: 4998 }))
      .toEqual({ kind: 'append', text: 'z\n', skipped: 4998 });
    expect(tail.accept({ offset: 10, next: 12, size: 12, text: 'q\n', inode: 2 })).toEqual({ kind: 'gap', from: 5002, to: 10 });
    expect(tail.accept({ offset: 9000, next: 9002, size: 9002, text: 'y\n', inode: 3, skipped: null }))
      .toEqual({ kind: 'append', text: 'y\n', skipped: null });
    expect(tail.inode).toBe(3);
  });

  it('tells files apart by inode and base: an inode is given again to a new file once its file is deleted', () => {
    const tail = new TailState();
    tail.accept({ offset: 0, next: 100, size: 100, text: 'x'.repeat(100), inode: 5, base: 0 });
    // the server jumped into a newer file that got inode 5 again: a jump, not bytes already had
    expect(tail.accept({ offset: 40, next: 42, size: 42, text: 'j\n', inode: 5, base: 9000, skipped: 8940 }))
      .toEqual({ kind: 'append', text: 'j\n', skipped: 8940 });
    tail.accept({ offset: 0, next: 2, size: 2, text: 'k\n', inode: 6, base: 9042 });
    // file 5 of base 9000 is behind us; a newer one given inode 5 is not
    expect(tail.accept({ offset: 0, next: 2, size: 2, text: 'j\n', inode: 5, base: 9000 })).toEqual({ kind: 'none' });
    expect(tail.accept({ offset: 0, next: 2, size: 2, text: 'l\n', inode: 5, base: 9044 }))
      .toEqual({ kind: 'append', text: 'l\n', skipped: 0 });
  });

  it('still starts over when the same file is truncated', () => {
    const tail = new TailState();
    tail.accept({ offset: 0, next: 10, size: 10, text: '0123456789', inode: 4 });
    expect(tail.accept({ offset: 0, next: 3, size: 3, text: 'new', inode: 4 })).toEqual({ kind: 'reset', text: 'new' });
  });
});

describe('LogLines notes', () => {
  it('ends the partial line, stays visible under every filter, and leaves continuation levels alone', () => {
    const log = new LogLines();
    log.append('[2026-12-02 15:12:22] ERROR (a) bad\npartial');
    log.note('… 1.0 MiB skipped to keep up …');
    log.append('continued\n');
    expect(log.lines).toEqual(['[2026-12-02 15:12:22] ERROR (a) bad', 'partial', '… 1.0 MiB skipped to keep up …', 'continued']);
    expect(log.levels).toEqual([3, 3, NOTE_LEVEL, 3]);
    expect(log.select(4, '')).toEqual([2]);
    expect(log.select(0, 'nothing like it')).toEqual([2]);
  });
});
