import { describe, expect, it } from 'vitest';
import { lttb, minMaxBuckets, perCurveBudget } from '../src/data/downsample';

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

describe('LTTB', () => {
  it('returns short data unchanged', () => {
    expect(lttb([0, 1, 2], [5, 6, 7], 10)).toEqual([[0, 1, 2], [5, 6, 7]]);
  });

  it('keeps the threshold number of points, the first and the last', () => {
    const xs = range(1000);
    const ys = xs.map((x) => Math.sin(x / 20));
    const [ox, oy] = lttb(xs, ys, 100);
    expect(ox.length).toBe(100);
    expect(oy.length).toBe(100);
    expect(ox[0]).toBe(0);
    expect(ox[99]).toBe(999);
    for (let i = 1; i < ox.length; i++) expect(ox[i]).toBeGreaterThan(ox[i - 1]);
  });

  it('keeps a spike', () => {
    const xs = range(500);
    const ys = xs.map((x) => (x === 321 ? 100 : 0));
    const [ox, oy] = lttb(xs, ys, 20);
    expect(ox).toContain(321);
    expect(Math.max(...oy)).toBe(100);
  });

  it('drops NaN points', () => {
    const [ox] = lttb([0, 1, 2, 3], [1, NaN, 2, 3], 10);
    expect(ox).toEqual([0, 2, 3]);
  });

  it('handles tiny thresholds', () => {
    expect(lttb(range(10), range(10), 2)).toEqual([[0, 9], [0, 9]]);
  });
});

describe('min/max buckets', () => {
  it('keeps the extremes of each bucket in x order', () => {
    const xs = range(100);
    const ys = xs.map((x) => (x % 10 === 3 ? -x : x % 10 === 7 ? x * 2 : 0));
    const [ox, oy] = minMaxBuckets(xs, ys, 10);
    expect(ox.length).toBe(20);
    expect(oy).toContain(-93);
    expect(oy).toContain(194);
    for (let i = 1; i < ox.length; i++) expect(ox[i]).toBeGreaterThan(ox[i - 1]);
  });

  it('returns short data unchanged', () => {
    expect(minMaxBuckets([1, 2], [3, 4], 5)).toEqual([[1, 2], [3, 4]]);
  });
});

describe('point budget', () => {
  it('splits a budget among curves with a floor', () => {
    expect(perCurveBudget(10, 1000)).toBe(100);
    expect(perCurveBudget(10_000, 1000, 4)).toBe(4);
  });
});
