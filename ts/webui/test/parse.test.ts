import { describe, expect, it } from 'vitest';
import { parseDuration, parseMetricData, parseParameters, parseTrial, trialDuration } from '../src/data/parse';
import { finalMetricData, trialView } from './helpers';

describe('parsing NNI shapes', () => {
  it('reads a metric data string encoded twice or once', () => {
    expect(parseMetricData('"0.57"')).toBe(0.57);
    expect(parseMetricData(JSON.stringify(JSON.stringify({ default: 1, x: 2 })))).toEqual({ default: 1, x: 2 });
    expect(parseMetricData('0.5')).toBe(0.5);
    expect(parseMetricData('not json')).toBe('not json');
  });

  it("takes a final result's number from the server, not from the reported value", () => {
    const t = parseTrial(trialView('a', 0, 'SUCCEEDED', { finalMetricData: finalMetricData('a', { default: 0.3, loss: 1 }), finalNumber: 0.3 }));
    expect(t.final).toBe(0.3);
    expect(t.finalRaw).toEqual({ default: 0.3, loss: 1 });
    // NaN reported: the server sends null, the trial has a result but no number
    const nan = parseTrial(trialView('b', 1, 'SUCCEEDED', { finalMetricData: finalMetricData('b', 'NaN'), finalNumber: null }));
    expect(nan.final).toBeUndefined();
    expect(nan.finalRaw).toBe('NaN');
  });

  it('reads parameters from hyperParameters', () => {
    expect(parseParameters(['{"parameter_id": 0, "parameters": {"lr": 0.1}}'])).toEqual({ lr: 0.1 });
    expect(parseParameters([])).toEqual({});
    expect(parseParameters(['{bad'])).toEqual({});
  });

  it('reads attempts as a count or as a list', () => {
    expect(parseTrial(trialView('a', 0, 'RUNNING', { attempts: 2 })).attempts).toBe(2);
    const listed = parseTrial(trialView('a', 0, 'FAILED', { attempts: [{ attempt: 1, exitCode: 1 }, { attempt: 2, signal: 9 }] }));
    expect(listed.attempts).toBe(2);
    expect(listed.attemptDetails![1].signal).toBe(9);
  });

  it("reads the node of a trial's latest attempt and of each attempt", () => {
    const t = parseTrial(trialView('a', 0, 'SUCCEEDED', {
      host: 'node-2', attemptDetails: [{ attempt: 1, host: 'node-1' }, { attempt: 2, host: 'node-2' }],
    }));
    expect(t.host).toBe('node-2');
    expect(t.attemptDetails!.map((a) => a.host)).toEqual(['node-1', 'node-2']);
    expect(parseTrial(trialView('b', 1, 'WAITING')).host).toBeUndefined();
  });

  it('offers to kill a trial only when the server says it can', () => {
    expect(parseTrial(trialView('a', 0, 'RUNNING', { canKill: true })).canKill).toBe(true);
    expect(parseTrial(trialView('a', 0, 'WAITING', { canKill: false })).canKill).toBe(false);
    expect(parseTrial(trialView('a', 0, 'PAUSED')).canKill).toBe(false); // not said: no control
  });

  it('reads the server\'s duration, a running attempt up to now', () => {
    // 2 s of ended attempts (first start to now would say 8 s: the wait before the retry is not counted)
    const t = parseTrial(trialView('a', 0, 'RUNNING', { startTime: 1000, duration: 2, runningSince: 6000 }));
    expect(trialDuration(t, 9000)).toBe(5);
    expect(trialDuration({ ...t, runningSince: undefined, endTime: 9000, status: 'SUCCEEDED' }, 20_000)).toBe(2);
    expect(trialDuration({ ...t, duration: undefined, runningSince: undefined }, 9000)).toBeUndefined();
  });

  it('reads durations like NNI', () => {
    expect(parseDuration('1.5h')).toBe(5400);
    expect(parseDuration('30')).toBe(30);
    expect(parseDuration(600)).toBe(600);
    expect(parseDuration('soon')).toBeNaN();
  });
});
