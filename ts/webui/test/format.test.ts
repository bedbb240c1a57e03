import { describe, expect, it } from 'vitest';
import { formatDuration } from '../src/ui/format';

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
