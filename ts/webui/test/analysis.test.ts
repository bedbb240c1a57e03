// The analysis views' pure rules: a result under a key, the key and the compared trials in
// the address, differing parameters, a curve's best point.
import { describe, expect, it } from 'vitest';
import {
  bestIntermediate, compareHref, differingParams, hashWithKey, keyFromHash, parseCompareIds, resultOf, trialsUnderKey,
} from '../src/data/analysis';
import { parseRoute } from '../src/ui/hooks';
import type { Trial } from '../src/data/types';
import { parseTrial } from '../src/data/parse';

function trial(id: string, params: Trial['params'], final?: number, finals?: Record<string, number>): Trial {
  return { id, seq: Number(id.slice(1)), status: 'SUCCEEDED', params, attempts: 1, canKill: false, rev: 0, final, finals };
}

describe('result keys', () => {
  it('reads a dict result under a key, default being the number every view shows', () => {
    const t = trial('t1', {}, 0.9, { default: 0.9, loss: 0.3 });
    expect(resultOf(t, 'default')).toBe(0.9);
    expect(resultOf(t, 'loss')).toBe(0.3);
    expect(resultOf(t, 'accuracy')).toBeUndefined();
    expect(resultOf(trial('t2', {}, 5), 'loss')).toBeUndefined();
  });

  it('takes the numbers under each key from the server, leaving out the ones that are not finite', () => {
    const parsed = parseTrial({
      trialJobId: 't1', sequenceId: 1, status: 'SUCCEEDED', finalNumber: 0.9,
      finalNumbers: { default: 0.9, loss: null, acc: 0.5 },
      finalMetricData: [{ timestamp: 0, trialJobId: 't1', parameterId: '1', type: 'FINAL', sequence: 0,
        data: JSON.stringify(JSON.stringify({ default: 0.9, loss: 'NaN', acc: 0.5 })) }],
    });
    expect(parsed.finals).toEqual({ default: 0.9, acc: 0.5 });
  });

  it('gives the table and charts the trials with their number under the chosen key', () => {
    const trials = [trial('t1', {}, 0.9, { default: 0.9, loss: 0.3 }), trial('t2', {}, 0.8)];
    expect(trialsUnderKey(trials, 'default')).toBe(trials);
    expect(trialsUnderKey(trials, 'loss').map((t) => t.final)).toEqual([0.3, undefined]);
    expect(trials[0].final).toBe(0.9); // the store's records are not changed
  });

  it('keeps the key in the address beside the route and the other settings', () => {
    expect(keyFromHash('#/trials')).toBe('default');
    expect(keyFromHash('#/trials?key=loss')).toBe('loss');
    expect(hashWithKey('#/trials', 'loss')).toBe('#/trials?key=loss');
    expect(hashWithKey('#/charts?key=loss&x=1', 'default')).toBe('#/charts?x=1');
    expect(hashWithKey('', 'a b')).toBe('#/?key=a+b');
    expect(parseRoute('#/trials?key=loss')).toEqual({ page: 'trials', search: 'key=loss' });
    expect(parseRoute('#/trials/t1?key=loss')).toEqual({ page: 'trial', trialId: 't1' });
  });
});

describe('compare', () => {
  it('routes #/compare/<ids> and reads the ids without repeats', () => {
    expect(parseRoute(compareHref(['a', 'b/c'], 'loss'))).toEqual({ page: 'compare', ids: 'a,b%2Fc' });
    expect(parseCompareIds('a,b%2Fc, a ,')).toEqual({ ids: ['a', 'b/c'], error: null });
  });

  it('refuses fewer than 2 and more than 10 trials, saying how many were given', () => {
    expect(parseCompareIds('a').error).toBe('Compare takes 2 to 10 trials; only 1 was given.');
    expect(parseCompareIds('').error).toBe('Compare takes 2 to 10 trials; none was given.');
    const eleven = Array.from({ length: 11 }, (_, i) => `t${i}`).join(',');
    expect(parseCompareIds(eleven).error).toBe('Compare takes 2 to 10 trials; 11 were given. Select at most 10.');
    expect(parseCompareIds(eleven.split(',').slice(0, 10).join(',')).error).toBeNull();
  });

  it('marks the parameters whose values differ, a missing one included', () => {
    const trials = [trial('t1', { lr: 0.1, opt: 'adam', depth: 2 }), trial('t2', { lr: 0.1, opt: 'sgd' })];
    expect([...differingParams(trials, ['lr', 'opt', 'depth'])].sort()).toEqual(['depth', 'opt']);
  });

  it('takes the best intermediate result in the optimize mode', () => {
    const series = { seq: [0, 1, 2], value: [0.5, 0.2, 0.7], time: [0, 0, 0] };
    expect(bestIntermediate(series, 'maximize')).toBe(0.7);
    expect(bestIntermediate(series, 'minimize')).toBe(0.2);
    expect(bestIntermediate({ seq: [], value: [], time: [] }, 'maximize')).toBeUndefined();
  });
});
