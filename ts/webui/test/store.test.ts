import { describe, expect, it } from 'vitest';
import { ExperimentData } from '../src/data/store';
import type { CompactMetric } from '../src/data/types';
import { changes, withFinal, metric, trialView } from './helpers';

describe('ExperimentData.apply', () => {
  it('loads a full snapshot: trials by sequence id, parameters and final results parsed', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', {
      full: true,
      trials: [
        trialView('b', 1, 'RUNNING'),
        trialView('a', 0, 'SUCCEEDED', withFinal('a', { default: 0.5, loss: 2 })),
      ],
    }));
    expect(store.loaded).toBe(true);
    expect(store.cursor).toBe('c1');
    expect(store.trials.map((t) => t.id)).toEqual(['a', 'b']);
    expect(store.trial('a')!.final).toBe(0.5);
    expect(store.trial('a')!.finalRaw).toEqual({ default: 0.5, loss: 2 });
    expect(store.trial('b')!.params).toEqual({ lr: 0.2 });
  });

  it("takes the best trial, the direction and the updatable fields from the server's experiment view", () => {
    const store = new ExperimentData();
    const experiment = {
      id: 'exp1', execDuration: 1, params: { tuner: { name: 'TPE' } }, status: 'RUNNING',
      optimizeMode: 'minimize' as const, bestTrialId: 'low',
      updatableFields: [{ field: 'trialConcurrency', updateType: 'TRIAL_CONCURRENCY' }],
    };
    store.apply(changes('c1', {
      full: true, experiment,
      trials: [
        trialView('high', 0, 'SUCCEEDED', withFinal('high', 0.9)),
        trialView('low', 1, 'SUCCEEDED', withFinal('low', 0.1)),
      ],
    }));
    // TPE minimizes by default: the config names no optimize_mode, the server knows the default
    expect(store.optimizeMode()).toBe('minimize');
    expect(store.bestTrial()!.id).toBe('low');
    expect(store.updateType('trialConcurrency')).toBe('TRIAL_CONCURRENCY');
    expect(store.updateType('maxTrialNumber')).toBeUndefined();
    store.apply(changes('c2', { experiment: { ...experiment, bestTrialId: null } }));
    expect(store.bestTrial()).toBeUndefined();
  });

  it("shows nodes when the server says the trials ran on several hosts, and follows a trial to its new host", () => {
    const store = new ExperimentData();
    const experiment = { id: 'exp1', execDuration: 1, params: {}, status: 'RUNNING' };
    store.apply(changes('c1', { full: true, experiment, trials: [trialView('a', 0, 'RUNNING', { attempts: 1, host: 'node-1' })] }));
    expect(store.multiHost()).toBe(false); // not said: one host, no column
    expect(store.trial('a')!.host).toBe('node-1');
    const before = store.trialsVersion;
    store.apply(changes('c2', {
      experiment: { ...experiment, multiHost: true },
      trials: [trialView('a', 0, 'RUNNING', { attempts: 2, host: 'node-2' })],
    }));
    expect(store.multiHost()).toBe(true);
    expect(store.trial('a')!.host).toBe('node-2');
    expect(store.trialsVersion).toBe(before + 1);
  });

  it("follows a waiting trial's reason as the server changes it, and drops it when the trial starts", () => {
    const store = new ExperimentData();
    const experiment = { id: 'exp1', execDuration: 1, params: {}, status: 'RUNNING' };
    const busy = 'waiting for a GPU: a trial needs 1 (trialGpuNumber); GPU 0 is used by another process (useActiveGpu: false)';
    store.apply(changes('c1', { full: true, experiment, trials: [trialView('a', 0, 'WAITING', { waitingReason: busy })] }));
    expect(store.trial('a')!.waitingReason).toBe(busy);
    const full = 'waiting for a GPU: a trial needs 1 (trialGpuNumber); GPU 0 runs 1 trial(s) of this experiment (maxTrialNumberPerGpu: 1)';
    let before = store.trialsVersion;
    store.apply(changes('c2', { trials: [trialView('a', 0, 'WAITING', { waitingReason: full })] }));
    expect(store.trial('a')!.waitingReason).toBe(full);
    expect(store.trialsVersion).toBe(before + 1);
    before = store.trialsVersion;
    store.apply(changes('c3', { trials: [trialView('a', 0, 'RUNNING', { attempts: 1 })] }));
    expect(store.trial('a')!.waitingReason).toBeUndefined();
    expect(store.trialsVersion).toBe(before + 1);
  });

  it('merges incremental changes by trial id and appends metrics', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING')] }));
    const before = store.trial('a');
    store.apply(changes('c2', {
      trials: [trialView('b', 1, 'WAITING')],
      metrics: [metric('a', 0, 0.1), metric('a', 1, 0.2)],
    }));
    expect(store.trials.map((t) => t.id)).toEqual(['a', 'b']);
    expect(store.trial('a')).toBe(before); // untouched trials keep their object (memoized rows skip them)
    expect(store.seriesOf('a').value).toEqual([0.1, 0.2]);
    store.apply(changes('c3', {
      trials: [trialView('a', 0, 'SUCCEEDED', { endTime: 9 })],
      metrics: [metric('a', 2, 0.3), metric('a', 0, 0.9, 'FINAL')],
    }));
    expect(store.trial('a')!.status).toBe('SUCCEEDED');
    expect(store.trial('a')!.final).toBe(0.9);
    expect(store.trial('a')!.rev).toBeGreaterThan(before!.rev);
    expect(store.seriesOf('a').value).toEqual([0.1, 0.2, 0.3]);
    expect(store.latest('a')).toBe(0.3);
  });

  it('ignores a duplicate message (same cursor) and duplicate metrics', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING')] }));
    const msg = changes('c2', { metrics: [metric('a', 0, 0.1), metric('a', 1, 0.2)] });
    expect(store.apply(msg)).toBe(true);
    const version = store.metricsVersion;
    expect(store.apply(msg)).toBe(false);
    expect(store.metricsVersion).toBe(version);
    // the same metrics again under a new cursor (a catch-up overlapping the socket) add nothing
    store.apply(changes('c3', { metrics: [metric('a', 1, 0.2), metric('a', 0, 0.1)] }));
    expect(store.seriesOf('a').seq).toEqual([0, 1]);
    expect(store.seriesRevision('a')).toBe(1);
  });

  it("takes the server's turn to read-only from a message that repeats a cursor", () => {
    const store = new ExperimentData();
    const experiment = { id: 'exp1', execDuration: 1, params: {}, status: 'DONE', readOnly: false };
    store.apply(changes('c1', { full: true, experiment }));
    expect(store.readOnly).toBe(false);
    // the search ended after the last write: the same cursor again, now read-only
    expect(store.apply(changes('c1', { experiment: { ...experiment, readOnly: true } }))).toBe(false);
    expect(store.readOnly).toBe(true);
  });

  it('places metrics that arrive out of order by their metric sequence', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING')] }));
    store.apply(changes('c2', { metrics: [metric('a', 3, 0.4), metric('a', 0, 0.1)] }));
    store.apply(changes('c3', { metrics: [metric('a', 2, 0.3), metric('a', 1, 0.2)] }));
    expect(store.seriesOf('a').seq).toEqual([0, 1, 2, 3]);
    expect(store.seriesOf('a').value).toEqual([0.1, 0.2, 0.3, 0.4]);
  });

  it('never moves a trial back on a stale view (out-of-order messages)', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true, trials: [trialView('a', 0, 'WAITING')] }));
    store.apply(changes('c3', { trials: [trialView('a', 0, 'SUCCEEDED', { startTime: 5, endTime: 9 })] }));
    // older messages arriving late
    store.apply(changes('c2', { trials: [trialView('a', 0, 'RUNNING', { startTime: 5 })] }));
    store.apply(changes('c0', { trials: [trialView('a', 0, 'WAITING')] }));
    expect(store.trial('a')!.status).toBe('SUCCEEDED');
    expect(store.trial('a')!.endTime).toBe(9);
  });

  it('follows a retry: RUNNING, WAITING for the next attempt, RUNNING again', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING', { attempts: 1, startTime: 5 })] }));
    store.apply(changes('c2', { trials: [trialView('a', 0, 'WAITING', { attempts: 1, startTime: 5 })] }));
    expect(store.trial('a')!.status).toBe('WAITING');
    store.apply(changes('c3', { trials: [trialView('a', 0, 'RUNNING', { attempts: 2, startTime: 7 })] }));
    store.apply(changes('c2b', { trials: [trialView('a', 0, 'WAITING', { attempts: 1, startTime: 5 })] }));
    expect(store.trial('a')!.status).toBe('RUNNING');
    expect(store.trial('a')!.attempts).toBe(2);
  });

  it('keeps a final result that came as a metric before its trial, and when a later view lacks it', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true }));
    store.apply(changes('c2', { metrics: [metric('x', 0, 0.7, 'FINAL')] }));
    store.apply(changes('c3', { trials: [trialView('x', 0, 'RUNNING')] }));
    expect(store.trial('x')!.final).toBe(0.7);
    store.apply(changes('c4', { trials: [trialView('x', 0, 'SUCCEEDED')] }));
    expect(store.trial('x')!.final).toBe(0.7);
  });

  it('inserts a trial with a lower sequence id in order', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING'), trialView('c', 2, 'RUNNING')] }));
    store.apply(changes('c2', { trials: [trialView('b', 1, 'RUNNING')] }));
    expect(store.trials.map((t) => t.seq)).toEqual([0, 1, 2]);
  });

  it('starts over on a full snapshot (a restarted server)', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true, trials: [trialView('a', 0, 'USER_CANCELED')], metrics: [metric('a', 0, 1)] }));
    store.apply(changes('n1', { full: true, trials: [trialView('a', 0, 'WAITING', { attempts: 1 })] }));
    expect(store.trial('a')!.status).toBe('WAITING');
    expect(store.seriesOf('a').value).toEqual([]);
  });

  it('bumps only the versions of what changed and notifies subscribers', () => {
    const store = new ExperimentData();
    let calls = 0;
    store.subscribe(() => calls++);
    store.apply(changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING')] }));
    const t = store.trialsVersion;
    store.apply(changes('c2', { trials: [trialView('a', 0, 'RUNNING')], metrics: [metric('a', 0, 1)] }));
    expect(store.trialsVersion).toBe(t);
    expect(store.metricsVersion).toBe(1);
    expect(calls).toBe(2);
  });

  it('takes readOnly from the experiment view and the hello', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true, experiment: { id: 'e', execDuration: 0, params: {}, status: 'DONE', readOnly: true } }));
    expect(store.readOnly).toBe(true);
    store.setReadOnly(false);
    expect(store.readOnly).toBe(false);
  });

  it('lists parameter names: the search space first, then others seen', () => {
    const store = new ExperimentData();
    const experiment = { id: 'e', execDuration: 0, status: 'RUNNING', params: { searchSpace: { b: {}, a: {} } } };
    store.apply(changes('c1', { full: true, experiment, trials: [trialView('x', 0, 'RUNNING', {}, { a: 1, b: 2, extra: 3 })] }));
    const keys = store.paramKeys();
    expect(keys).toEqual(['b', 'a', 'extra']);
    store.apply(changes('c2', { experiment, trials: [trialView('y', 1, 'RUNNING', {}, { a: 2, b: 3 })] }));
    expect(store.paramKeys()).toBe(keys); // unchanged names: the same array
    store.apply(changes('c3', { experiment, trials: [trialView('z', 2, 'RUNNING', {}, { c: 1 })] }));
    expect(store.paramKeys()).toEqual(['b', 'a', 'extra', 'c']);
  });

  // how fast is measured by tests/perf/webui_scale.py, not here: a loaded CI machine is no clock
  it('loads 10,000 trials with 20 metrics each', () => {
    const store = new ExperimentData();
    const trials = [];
    const metrics = [];
    for (let i = 0; i < 10_000; i++) {
      trials.push(trialView(`t${i}`, i, 'SUCCEEDED', withFinal(`t${i}`, i / 10_000)));
      for (let s = 0; s < 20; s++) metrics.push(metric(`t${i}`, s, s / 20, 'PERIODICAL', i));
    }
    store.apply(changes('c1', { full: true, trials, metrics }));
    expect(store.trials.length).toBe(10_000);
    expect(store.seriesOf('t9999').value.length).toBe(20);
  });
});

describe('versions', () => {
  it('does not bump experimentVersion when an answer repeats the same profile and statistics', () => {
    const store = new ExperimentData();
    store.apply(changes('c1', { full: true, statistics: [{ trialJobStatus: 'RUNNING', trialJobNumber: 1 }] }));
    const v = store.experimentVersion;
    store.apply(changes('c2', { statistics: [{ trialJobStatus: 'RUNNING', trialJobNumber: 1 }] }));
    expect(store.experimentVersion).toBe(v);
    store.apply(changes('c3', { statistics: [{ trialJobStatus: 'RUNNING', trialJobNumber: 2 }] }));
    expect(store.experimentVersion).toBe(v + 1);
    expect(store.counts()).toEqual({ RUNNING: 2 });
  });
});

describe('retried trials', () => {
  it("keeps the intermediate results of a trial's last attempt", () => {
    const store = new ExperimentData();
    const m = (step: number, value: number, attempt: number): CompactMetric => ['a', 0, 'PERIODICAL', step, value, step, attempt];
    store.apply(changes('c1', { full: true, trials: [trialView('a', 0, 'RUNNING')], metrics: [m(0, 1, 1), m(1, 2, 1), m(2, 3, 1)] }));
    store.apply(changes('c2', { metrics: [m(0, 10, 2)] }));
    expect(store.seriesOf('a').value).toEqual([10]);
    store.apply(changes('c3', { metrics: [m(3, 4, 1), m(1, 20, 2)] })); // a late result of attempt 1 is dropped
    expect(store.seriesOf('a').value).toEqual([10, 20]);
    expect(store.seriesOf('a').attempt).toBe(2);
  });
});
