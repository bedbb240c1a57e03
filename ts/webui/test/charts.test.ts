import { describe, expect, it } from 'vitest';
import {
  BACKGROUND_POINT_BUDGET, CURVE_POINT_BUDGET, MAX_COLOURED_CURVES, MAX_GREY_CURVES, countPoints, curvesOption, describeParallelAxes, finalOption, parallelOption,
  selectCurves,
} from '../src/charts/options';
import { parseTrial } from '../src/data/parse';
import type { Series, Trial } from '../src/data/types';
import { withFinal, trialView } from './helpers';

function makeTrials(n: number, steps: number): { trials: Trial[]; series: Map<string, Series> } {
  const trials: Trial[] = [];
  const series = new Map<string, Series>();
  for (let i = 0; i < n; i++) {
    const id = `t${i}`;
    trials.push(parseTrial(trialView(id, i, i % 10 === 0 ? 'RUNNING' : 'SUCCEEDED',
      i % 10 === 0 ? {} : withFinal(id, (i * 37) % 101), { lr: i / n, opt: i % 2 ? 'adam' : 'sgd' })));
    const s: Series = { seq: [], value: [], time: [] };
    for (let k = 0; k < steps; k++) {
      s.seq.push(k);
      s.value.push(Math.sin(i + k / 5));
      s.time.push(k);
    }
    series.set(id, s);
  }
  return { trials, series };
}

describe('intermediate curves', () => {
  it('picks the best trials by final result (latest intermediate while running)', () => {
    const { trials, series } = makeTrials(30, 5);
    const sel = selectCurves(trials, (id) => series.get(id)!, 'best', 3, [], 'maximize', false);
    const finals = trials.filter((t) => t.final !== undefined).map((t) => t.final!).sort((a, b) => b - a);
    expect(sel.shown.length).toBe(3);
    expect(sel.others.length).toBe(0);
    for (const c of sel.shown) {
      const t = trials.find((x) => x.id === c.id)!;
      expect(t.final === undefined || t.final >= finals[2]).toBe(true);
    }
  });

  it('selects running, latest and chosen trials', () => {
    const { trials, series } = makeTrials(30, 5);
    const get = (id: string) => series.get(id)!;
    expect(selectCurves(trials, get, 'running', 0, [], 'maximize', false).shown.map((c) => c.id)).toEqual(['t0', 't10', 't20']);
    expect(selectCurves(trials, get, 'latest', 2, [], 'maximize', false).shown.map((c) => c.id)).toEqual(['t28', 't29']);
    const chosen = selectCurves(trials, get, 'selected', 0, ['t5', 't7'], 'maximize', true);
    expect(chosen.shown.map((c) => c.id)).toEqual(['t5', 't7']);
    expect(chosen.others.length).toBe(28);
  });

  it('downsamples when 10,000 trials x 20 steps are drawn: coloured curves capped, grey ones within budget', () => {
    const { trials, series } = makeTrials(10_000, 20);
    const sel = selectCurves(trials, (id) => series.get(id)!, 'all', 0, [], 'maximize', true);
    expect(sel.shown.length).toBe(MAX_COLOURED_CURVES);
    expect(sel.othersTotal).toBe(10_000 - MAX_COLOURED_CURVES);
    expect(sel.others.length).toBe(MAX_GREY_CURVES); // sampled evenly
    const option = curvesOption(sel);
    expect(option.series.length).toBe(MAX_COLOURED_CURVES + 1);
    expect(countPoints(option)).toBeLessThan(CURVE_POINT_BUDGET + BACKGROUND_POINT_BUDGET);
    expect(countPoints(option)).toBeLessThan(10_000 * 20);
  });

  it('downsamples long curves with LTTB', () => {
    const { trials, series } = makeTrials(50, 5000);
    const option = curvesOption(selectCurves(trials, (id) => series.get(id)!, 'latest', 50, [], 'maximize', false));
    expect(countPoints(option)).toBeLessThanOrEqual(CURVE_POINT_BUDGET);
    expect((option.series[0].data as unknown[]).length).toBe(CURVE_POINT_BUDGET / 50);
  });
});

describe('other charts', () => {
  it('final results with a best-so-far step line of its changes only', () => {
    const { trials } = makeTrials(100, 1);
    const option = finalOption(trials, 'maximize');
    expect((option.series[0].data as unknown[]).length).toBe(90);
    const best = option.series[1].data as [number, number][];
    for (let i = 1; i < best.length; i++) expect(best[i][1]).toBeGreaterThanOrEqual(best[i - 1][1]);
    expect(best[best.length - 1][0]).toBe(99);
  });

  it('parallel coordinates: numeric and category axes, result last, coloured by result', () => {
    const { trials } = makeTrials(20, 1);
    const option = parallelOption(trials, ['lr', 'opt'], { lr: { _type: 'loguniform', _value: [0.001, 1] } }, 'maximize');
    const axes = option.parallelAxis as { name: string; type: string; data?: string[] }[];
    expect(axes.map((a) => a.type)).toEqual(['log', 'category', 'value']); // loguniform: log axis
    expect(axes[1].data).toEqual(['adam', 'sgd']);
    expect((option.visualMap as { dimension: number }).dimension).toBe(2);
    expect((option.series[0].data as unknown[]).length).toBe(18);
  });

  it('parallel coordinates: a numeric choice is a category axis of exactly its values, in the space\'s order', () => {
    const trials = [8, 64, 16, 8].map((batch, i) => parseTrial(trialView(`t${i}`, i, 'SUCCEEDED', withFinal(`t${i}`, i),
      { batch, lr: 0.1 * (i + 1) })));
    const space = { batch: { _type: 'choice', _value: [8, 16, 32, 64] }, lr: { _type: 'uniform', _value: [0, 1] } };
    const option = parallelOption(trials, ['batch', 'lr'], space, 'maximize');
    const axes = option.parallelAxis as { name: string; type: string; data?: string[] }[];
    expect(axes[0]).toMatchObject({ name: 'batch', type: 'category', data: ['8', '16', '32', '64'] });
    expect(axes[1].type).toBe('value');
    expect((option.series[0].data as unknown[][]).map((row) => row[0])).toEqual(['8', '64', '16', '8']);
    expect(describeParallelAxes(option)).toBe('batch: category 8|16|32|64; lr: value; result: value');
  });
});
