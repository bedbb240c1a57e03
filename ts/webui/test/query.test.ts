import { describe, expect, it } from 'vitest';
import { parseTrial } from '../src/data/parse';
import {
  EMPTY_QUERY, bestSoFar, filterTrials, makeRowSelector, paramMatcher, sortTrials, type TrialQuery,
} from '../src/data/query';
import type { Trial } from '../src/data/types';
import { withFinal, trialView } from './helpers';

function t(id: string, seq: number, status: string, params: Record<string, unknown>, final?: number, startTime?: number,
           endTime?: number): Trial {
  return parseTrial(trialView(id, seq, status, {
    startTime, endTime, ...(final === undefined ? {} : withFinal(id, final)),
    ...(startTime !== undefined && endTime !== undefined ? { duration: (endTime - startTime) / 1000 } : {}),
  }, params));
}

const trials = [
  t('a', 0, 'SUCCEEDED', { lr: 0.1, opt: 'adam', layers: 2 }, 0.8, 0, 5000),
  t('b', 1, 'FAILED', { lr: 0.01, opt: 'sgd', layers: 3 }, undefined, 0, 1000),
  t('c', 2, 'SUCCEEDED', { lr: 0.5, opt: 'adam', layers: 4 }, 0.6, 0, 2000),
  t('d', 3, 'RUNNING', { lr: 0.05, opt: { _name: 'rmsprop', rho: 0.9 }, layers: 2 }),
  t('e', 4, 'SUCCEEDED', { lr: 0.2, opt: 'sgd' }, 0.9, 0, 3000),
];

const q = (patch: Partial<TrialQuery>): TrialQuery => ({ ...EMPTY_QUERY, ...patch });
const ids = (list: Trial[]) => list.map((x) => x.id);

describe('filters', () => {
  it('filter by state', () => {
    expect(ids(filterTrials(trials, q({ states: ['SUCCEEDED'] })))).toEqual(['a', 'c', 'e']);
    expect(ids(filterTrials(trials, q({ states: ['FAILED', 'RUNNING'] })))).toEqual(['b', 'd']);
  });

  it('filter by result range (trials without a result are left out)', () => {
    expect(ids(filterTrials(trials, q({ resultMin: 0.7 })))).toEqual(['a', 'e']);
    expect(ids(filterTrials(trials, q({ resultMin: 0.6, resultMax: 0.8 })))).toEqual(['a', 'c']);
  });

  it('filter by parameter values', () => {
    expect(ids(filterTrials(trials, q({ params: { opt: 'adam' } })))).toEqual(['a', 'c']);
    expect(ids(filterTrials(trials, q({ params: { lr: '0.05..0.2' } })))).toEqual(['a', 'd', 'e']);
    expect(ids(filterTrials(trials, q({ params: { lr: '>0.1', opt: 'sgd' } })))).toEqual(['e']);
    expect(ids(filterTrials(trials, q({ params: { opt: 'rmsprop' } })))).toEqual(['d']);
    expect(ids(filterTrials(trials, q({ params: { layers: '=2' } })))).toEqual(['a', 'd']);
    expect(ids(filterTrials(trials, q({ params: { opt: 'adam|sgd' } })))).toEqual(['a', 'b', 'c', 'e']);
    expect(ids(filterTrials(trials, q({ params: { opt: '!adam' } })))).toEqual(['b', 'd', 'e']);
  });

  it('filter by id and combine filters', () => {
    expect(ids(filterTrials(trials, q({ id: 'C' })))).toEqual(['c']);
    expect(ids(filterTrials(trials, q({ states: ['SUCCEEDED'], params: { opt: 'adam' }, resultMin: 0.7 })))).toEqual(['a']);
  });

  it('parses parameter expressions', () => {
    expect(paramMatcher('')).toBeNull();
    expect(paramMatcher('<=0.1')!(0.1)).toBe(true);
    expect(paramMatcher('<0.1')!(0.1)).toBe(false);
    expect(paramMatcher('..0.1')!(-5)).toBe(true);
    expect(paramMatcher('>=x')!(1)).toBe(false);
    expect(paramMatcher('=adam')!('adam')).toBe(true);
  });

  it('a|b keeps the values equal to one of them, not the ones containing one (docs/webui.md: any of)', () => {
    const anyOf = paramMatcher('8|16')!;
    expect([8, 16, 32, 64, 160, 1.6].filter((v) => anyOf(v))).toEqual([8, 16]);
    const names = paramMatcher('adam | sgd')!;
    expect(['adam', 'ADAM', 'adamw', 'sgd', 'nadam'].filter((v) => names(v))).toEqual(['adam', 'ADAM', 'sgd']);
    const comparisons = paramMatcher('<0.01|>0.5|0.1')!;
    expect([0.001, 0.1, 0.2, 0.7].filter((v) => comparisons(v))).toEqual([0.001, 0.1, 0.7]);
    expect(paramMatcher('|')).toBeNull();
  });
});

describe('sorting', () => {
  it('sorts by final result, missing results last in both directions', () => {
    expect(ids(sortTrials(trials, { key: 'final', dir: 'desc' }))).toEqual(['e', 'a', 'c', 'b', 'd']);
    expect(ids(sortTrials(trials, { key: 'final', dir: 'asc' }))).toEqual(['c', 'a', 'e', 'b', 'd']);
  });

  it("sorts and filters by the node of the trial's latest attempt; trials without one last", () => {
    const hosted = trials.map((x, i) => (i < 3 ? { ...x, host: ['n2', 'n10', 'n1'][i] } : x));
    expect(ids(sortTrials(hosted, { key: 'host', dir: 'asc' }))).toEqual(['c', 'b', 'a', 'd', 'e']);
    expect(ids(filterTrials(hosted, q({ host: 'N1' })))).toEqual(['b', 'c']);
  });

  it('sorts by a parameter, by state, by duration; ties keep sequence order', () => {
    expect(ids(sortTrials(trials, { key: 'param:lr', dir: 'asc' }))).toEqual(['b', 'd', 'a', 'e', 'c']);
    expect(ids(sortTrials(trials, { key: 'param:layers', dir: 'desc' }))).toEqual(['c', 'b', 'a', 'd', 'e']);
    expect(ids(sortTrials(trials, { key: 'status', dir: 'asc' }))).toEqual(['b', 'd', 'a', 'c', 'e']);
    expect(ids(sortTrials(trials, { key: 'duration', dir: 'asc' }, 10_000))).toEqual(['b', 'c', 'e', 'a', 'd']);
  });

  it('recomputes rows only when the data, the query or the sort changes', () => {
    const select = makeRowSelector();
    const query = q({ states: ['SUCCEEDED'] });
    const first = select(trials, 1, query, { key: 'final', dir: 'desc' });
    expect(ids(first)).toEqual(['e', 'a', 'c']);
    expect(select(trials, 1, query, { key: 'final', dir: 'desc' })).toBe(first);
    expect(select(trials, 2, query, { key: 'final', dir: 'desc' })).not.toBe(first);
  });

  // how fast is measured by tests/perf/webui_scale.py, not here: a loaded CI machine is no clock
  it('sorts and filters 10,000 trials', () => {
    const many: Trial[] = [];
    for (let i = 0; i < 10_000; i++) many.push(t(`t${i}`, i, i % 3 ? 'SUCCEEDED' : 'FAILED', { lr: (i * 7919) % 1000 / 1000 }, (i * 31) % 97));
    const rows = sortTrials(filterTrials(many, q({ states: ['SUCCEEDED'], params: { lr: '>0.5' } })), { key: 'final', dir: 'desc' });
    expect(rows.length).toBeGreaterThan(3000);
    for (let i = 1; i < rows.length; i++) expect(rows[i - 1].final! >= rows[i].final!).toBe(true);
  });
});

describe('best results', () => {
  it('finds the best so far for either direction', () => {
    expect(bestSoFar(trials, 'maximize')).toEqual([[0, 2, 4], [0.8, 0.8, 0.9]]);
    expect(bestSoFar(trials, 'minimize')).toEqual([[0, 2, 4], [0.8, 0.6, 0.6]]);
  });
});
