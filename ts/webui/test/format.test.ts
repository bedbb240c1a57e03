import { describe, expect, it } from 'vitest';
import { formatAway, formatDuration, formatTime, formatTimeSpan } from '../src/ui/format';

describe('formatDuration', () => {
  it('keeps what a short duration is made of', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(0.004)).toBe('4ms');
    expect(formatDuration(0.65)).toBe('0.65s');
    expect(formatDuration(0.6549)).toBe('0.65s');
    expect(formatDuration(2)).toBe('2.0s');
    expect(formatDuration(2.345)).toBe('2.3s');
    expect(formatDuration(9.94)).toBe('9.9s');
  });

  it('counts whole seconds from 10 s, then minutes with two-digit seconds', () => {
    expect(formatDuration(9.96)).toBe('10s');
    expect(formatDuration(42.4)).toBe('42s');
    expect(formatDuration(59.6)).toBe('1m');
    expect(formatDuration(65)).toBe('1m 05s');
    expect(formatDuration(600)).toBe('10m');
  });

  it('drops the zero parts of long durations', () => {
    expect(formatDuration(3600)).toBe('1h');
    expect(formatDuration(3600 + 3 * 60 + 7)).toBe('1h 03m 07s');
    expect(formatDuration(3605)).toBe('1h 05s');
    expect(formatDuration(2 * 86400 + 3 * 3600)).toBe('2d 3h');
    expect(formatDuration(4000 * 86400)).toBe('4000d');
    expect(formatDuration(86400 + 5 * 60 + 9)).toBe('1d 05m');
  });

  it('shows nothing for a missing or unreadable duration, and no negative one', () => {
    expect(formatDuration(undefined)).toBe('');
    expect(formatDuration(NaN)).toBe('');
    expect(formatDuration(-3)).toBe('0s');
  });
});

describe('formatAway', () => {
  it('says how long in all and how many times, in the durations of the page', () => {
    expect(formatAway(192, 2)).toBe('3m 12s (2 times)');
    expect(formatAway(45.4, 1)).toBe('45s (once)');
    expect(formatAway(2 * 3600 + 3 * 60, 5)).toBe('2h 03m (5 times)');
  });
});

describe('formatTimeSpan', () => {
  it('leaves out the end date when it is the start date', () => {
    const from = new Date(2025, 2, 1, 10, 0, 0).getTime();
    expect(formatTimeSpan(from, from + 192_000)).toBe('2025-03-01 10:00:00 to 10:03:12');
    expect(formatTimeSpan(from, from)).toBe(`${formatTime(from)} to 10:00:00`);
  });

  it('keeps it across midnight', () => {
    const from = new Date(2025, 2, 1, 23, 50, 0).getTime();
    expect(formatTimeSpan(from, from + 20 * 60_000)).toBe('2025-03-01 23:50:00 to 2025-03-02 00:10:00');
  });
});
