import { describe, expect, it } from 'vitest';
import { LogLines, TailState, lineLevel } from '../src/data/logs';

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
