// ECharts options for the charts, built from the store's records. Pure functions (no ECharts
// import), so the main bundle and the unit tests need no ECharts; the chart chunk is loaded
// only when a chart is shown.
import { lttb, perCurveBudget } from '../data/downsample';
import { trialDuration } from '../data/parse';
import { bestSoFar, formatNumber, formatParam } from '../data/query';
import type { Json, Series, Trial } from '../data/types';

export type Option = Record<string, unknown> & { series: Record<string, unknown>[] };

const COLORS = ['#3b6fd8', '#e8684a', '#5ab26f', '#9a60b4', '#f0b429', '#2bb1c4', '#d94f8a', '#7b8694'];

const BASE = {
  animation: false,
  color: COLORS,
  textStyle: { fontFamily: 'inherit' },
  backgroundColor: 'transparent', // the card's, in either colour theme
};

/** Number of points an option draws (for data-points and tests). */
export function countPoints(option: Option): number {
  let n = 0;
  for (const s of option.series) {
    const data = s.data as unknown[] | undefined;
    if (Array.isArray(data)) n += data.length;
  }
  return n;
}

/** Keeps the points where a step line changes, and its last point. */
function stepPoints(xs: number[], ys: number[]): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < xs.length; i++) {
    if (i === 0 || ys[i] !== ys[i - 1] || i === xs.length - 1) out.push([xs[i], ys[i]]);
  }
  return out;
}

/** Final result of each trial over trial order, and the best so far. */
export function finalOption(trials: readonly Trial[], mode: 'maximize' | 'minimize'): Option {
  const points: [number, number, string][] = [];
  for (const t of trials) if (t.final !== undefined) points.push([t.seq, t.final, t.id]);
  const [bx, by] = bestSoFar(trials, mode);
  return {
    ...BASE,
    grid: { left: 64, right: 24, top: 36, bottom: 40 },
    legend: undefined,
    tooltip: {
      trigger: 'item',
      formatter: (p: { data: [number, number, string?]; seriesName: string }) => (p.data[2] !== undefined
        ? `trial ${p.data[2]} (#${p.data[0]})<br/>result ${formatNumber(p.data[1])}`
        : `best so far at #${p.data[0]}: ${formatNumber(p.data[1])}`),
    },
    xAxis: { type: 'value', name: 'trial #', nameLocation: 'middle', nameGap: 26, minInterval: 1 },
    yAxis: { type: 'value', name: 'result', scale: true },
    dataZoom: [{ type: 'inside', xAxisIndex: 0, filterMode: 'none' }],
    series: [
      {
        type: 'scatter', name: 'final result', data: points, symbolSize: points.length > 2000 ? 3 : 6,
        large: points.length > 2000, largeThreshold: 2000, encode: { x: 0, y: 1 },
        itemStyle: { opacity: 0.7 },
      },
      {
        type: 'line', name: 'best so far', data: stepPoints(bx, by), step: 'end', showSymbol: false,
        lineStyle: { width: 2, color: COLORS[1] }, itemStyle: { color: COLORS[1] }, z: 3,
      },
    ],
  };
}

export interface Curve {
  id: string;
  series: Series;
}

export interface CurvesSelection {
  /** Drawn one series each, coloured, hoverable. */
  shown: Curve[];
  /** Drawn together in grey behind, for context (at most MAX_GREY_CURVES, evenly sampled). */
  others: Curve[];
  /** How many other trials there are (more than `others` when sampled). */
  othersTotal: number;
}

/** The most grey curves drawn: past this they are sampled evenly in trial order. */
export const MAX_GREY_CURVES = 2000;

/** `count` items of `items`, evenly spaced (all of them if fewer). */
export function sampleEvenly<T>(items: readonly T[], count: number): T[] {
  if (items.length <= count) return items.slice();
  const out: T[] = [];
  const step = items.length / count;
  for (let i = 0; i < count; i++) out.push(items[Math.floor(i * step)]);
  return out;
}

export type CurvesMode = 'best' | 'latest' | 'running' | 'selected' | 'all';

/** Above this many curves, "all" draws the best ones in colour and the rest in grey. */
export const MAX_COLOURED_CURVES = 100;

/**
 * Which trials' intermediate curves are drawn in colour (and which in grey behind).
 * `best`: the `count` best by final result (or latest intermediate, while running);
 * `latest`: the `count` last trials; `running`: the running ones; `selected`: `selected` ids;
 * `all`: every trial, in colour up to MAX_COLOURED_CURVES.
 */
export function selectCurves(trials: readonly Trial[], seriesOf: (id: string) => Series, mode: CurvesMode,
                             count: number, selected: readonly string[], optimize: 'maximize' | 'minimize',
                             withOthers: boolean): CurvesSelection {
  const withData = trials.filter((t) => seriesOf(t.id).value.length > 0);
  let shownTrials: Trial[];
  switch (mode) {
    case 'latest':
      shownTrials = withData.slice(-count);
      break;
    case 'running':
      shownTrials = withData.filter((t) => t.status === 'RUNNING');
      break;
    case 'selected': {
      const ids = new Set(selected);
      shownTrials = withData.filter((t) => ids.has(t.id));
      break;
    }
    case 'all':
      shownTrials = withData.length <= MAX_COLOURED_CURVES ? withData
        : rankBest(withData, seriesOf, optimize).slice(0, MAX_COLOURED_CURVES);
      break;
    default:
      shownTrials = rankBest(withData, seriesOf, optimize).slice(0, count);
  }
  const shownIds = new Set(shownTrials.map((t) => t.id));
  const shown = shownTrials.sort((a, b) => a.seq - b.seq).map((t) => ({ id: t.id, series: seriesOf(t.id) }));
  const rest = withOthers || mode === 'all' ? withData.filter((t) => !shownIds.has(t.id)) : [];
  const others = sampleEvenly(rest, MAX_GREY_CURVES).map((t) => ({ id: t.id, series: seriesOf(t.id) }));
  return { shown, others, othersTotal: rest.length };
}

function rankBest(trials: Trial[], seriesOf: (id: string) => Series, optimize: 'maximize' | 'minimize'): Trial[] {
  const score = (t: Trial) => {
    if (t.final !== undefined) return t.final;
    const v = seriesOf(t.id).value;
    return v[v.length - 1];
  };
  const sign = optimize === 'maximize' ? -1 : 1;
  return trials.slice().sort((a, b) => sign * (score(a) - score(b)) || a.seq - b.seq);
}

/** Points in all drawn curves together: past this, each curve is downsampled (LTTB). */
export const CURVE_POINT_BUDGET = 40_000;
export const BACKGROUND_POINT_BUDGET = 40_000;

/** Intermediate results of many trials overlaid; hovering one highlights it. */
export function curvesOption(selection: CurvesSelection, highlight: string | null = null): Option {
  const perShown = perCurveBudget(selection.shown.length, CURVE_POINT_BUDGET, 16);
  const series: Record<string, unknown>[] = [];
  if (selection.others.length) {
    // one series for all the grey curves, broken between trials
    const perOther = perCurveBudget(selection.others.length, BACKGROUND_POINT_BUDGET, 4);
    const data: (number | string)[][] = [];
    for (const c of selection.others) {
      const [xs, ys] = lttb(c.series.seq, c.series.value, perOther);
      for (let i = 0; i < xs.length; i++) data.push([xs[i], ys[i]]);
      data.push(['-', '-']);
    }
    series.push({
      type: 'line', name: 'other trials', data, showSymbol: false, silent: true, connectNulls: false,
      // fainter as they multiply, so that their density shows
      lineStyle: { width: 1, color: '#9aa3b2', opacity: Math.max(0.04, Math.min(0.5, 40 / selection.others.length)) },
      itemStyle: { color: '#9aa3b2' }, z: 1,
      emphasis: { disabled: true }, tooltip: { show: false },
    });
  }
  for (const c of selection.shown) {
    const [xs, ys] = lttb(c.series.seq, c.series.value, perShown);
    const data = xs.map((x, i) => [x, ys[i]]);
    const isHighlighted = highlight === c.id;
    series.push({
      type: 'line', name: c.id, id: `trial-${c.id}`, data, showSymbol: data.length <= 30, symbolSize: 4,
      emphasis: { focus: 'series', lineStyle: { width: 3 } }, triggerLineEvent: true, z: isHighlighted ? 4 : 2,
      lineStyle: { width: isHighlighted ? 3 : 1.5 },
    });
  }
  return {
    ...BASE,
    grid: { left: 64, right: 24, top: 36, bottom: 40 },
    tooltip: {
      trigger: 'item',
      formatter: (p: { seriesName: string; data: [number, number] }) =>
        `trial ${p.seriesName}<br/>step ${p.data[0]}: ${formatNumber(p.data[1])}`,
    },
    xAxis: { type: 'value', name: 'step', nameLocation: 'middle', nameGap: 26, minInterval: 1, scale: true },
    yAxis: { type: 'value', name: 'intermediate result', scale: true },
    dataZoom: [{ type: 'inside', xAxisIndex: 0, filterMode: 'none' }],
    series,
  };
}

/** One trial's intermediate results, and its final result as a dashed line. */
export function trialCurveOption(series: Series, final: number | undefined): Option {
  const [xs, ys] = lttb(series.seq, series.value, 2000);
  const data = xs.map((x, i) => [x, ys[i]]);
  const out: Record<string, unknown>[] = [{
    type: 'line', name: 'intermediate', data, showSymbol: data.length <= 50, symbolSize: 5,
  }];
  if (final !== undefined && xs.length) {
    out.push({
      type: 'line', name: 'final', data: [[xs[0], final], [xs[xs.length - 1], final]], showSymbol: false,
      lineStyle: { type: 'dashed', color: COLORS[1] }, itemStyle: { color: COLORS[1] }, silent: true,
    });
  }
  return {
    ...BASE,
    grid: { left: 64, right: 24, top: 24, bottom: 36 },
    tooltip: { trigger: 'axis' },
    xAxis: { type: 'value', name: 'step', nameLocation: 'middle', nameGap: 24, minInterval: 1, scale: true },
    yAxis: { type: 'value', scale: true },
    series: out,
  };
}

const LOG_TYPES = new Set(['loguniform', 'qloguniform']);

/** A `choice` parameter's values as its axis lists them (in the search space's order), or null for other types. */
function choiceValues(spec: unknown): string[] | null {
  const s = spec as { _type?: string; _value?: unknown } | undefined;
  if (s?._type !== 'choice' || !Array.isArray(s._value)) return null;
  return [...new Set(s._value.map((v) => formatParam(v as Json) || '—'))];
}

/**
 * Hyperparameters as parallel coordinates, one line per trial with a final result, coloured by it.
 * A `choice` parameter has a category axis of exactly its values (8, 16, 32, 64 are four choices,
 * not a range from 0 to 70); numbers of other types a value axis (log for log types); others categories.
 */
export function parallelOption(trials: readonly Trial[], keys: readonly string[],
                               searchSpace: Record<string, Json> | undefined, optimize: 'maximize' | 'minimize'): Option {
  const done = trials.filter((t) => t.final !== undefined);
  const axes: Record<string, unknown>[] = [];
  const columns: ((t: Trial) => number | string)[] = [];
  keys.forEach((key, dim) => {
    const numeric = done.length > 0 && done.every((t) => typeof t.params[key] === 'number');
    const spec = searchSpace?.[key] as { _type?: string } | undefined;
    const choices = choiceValues(spec);
    if (choices) {
      // values the space no longer lists (it was edited) are kept, after its own
      const extra = [...new Set(done.map((t) => formatParam(t.params[key]) || '—'))].filter((v) => !choices.includes(v));
      axes.push({ dim, name: key, type: 'category', data: [...choices, ...extra.sort()] });
      columns.push((t) => formatParam(t.params[key]) || '—');
    } else if (numeric) {
      const positive = done.every((t) => (t.params[key] as number) > 0);
      axes.push({ dim, name: key, type: spec && LOG_TYPES.has(spec._type ?? '') && positive ? 'log' : 'value', scale: true });
      columns.push((t) => t.params[key] as number);
    } else {
      const values = [...new Set(done.map((t) => formatParam(t.params[key]) || '—'))].sort();
      axes.push({ dim, name: key, type: 'category', data: values });
      columns.push((t) => formatParam(t.params[key]) || '—');
    }
  });
  const resultDim = keys.length;
  axes.push({ dim: resultDim, name: 'result', type: 'value', scale: true, nameTextStyle: { fontWeight: 'bold' } });
  const data = done.map((t) => [...columns.map((c) => c(t)), t.final as number]);
  let min = Infinity;
  let max = -Infinity;
  for (const t of done) {
    min = Math.min(min, t.final!);
    max = Math.max(max, t.final!);
  }
  if (!done.length) {
    min = 0;
    max = 1;
  }
  // viridis: ordered, and still readable where thousands of lines cross
  const colors = ['#440154', '#3b528b', '#21918c', '#5ec962', '#fde725'];
  return {
    ...BASE,
    parallel: { left: 70, right: 140, top: 48, bottom: 36, parallelAxisDefault: { nameGap: 12, nameTextStyle: { fontSize: 12 } } },
    parallelAxis: axes,
    visualMap: {
      type: 'continuous', min, max, dimension: resultDim, calculable: true, right: 8, top: 'center',
      itemHeight: 160, text: ['high', 'low'],
      inRange: { color: optimize === 'maximize' ? colors : colors.slice().reverse() },
      precision: 4,
    },
    series: [{
      type: 'parallel', data, smooth: false, progressive: 1000, progressiveThreshold: 3000,
      lineStyle: { width: 1, opacity: done.length > 2000 ? 0.25 : 0.55 },
      emphasis: { lineStyle: { width: 2, opacity: 1 } },
    }],
  };
}

/** The parallel axes of `option` in words, `name: category a|b|c` or `name: value` (log), one per axis, `; ` between. */
export function describeParallelAxes(option: Option): string {
  const axes = (option.parallelAxis ?? []) as { name: string; type: string; data?: string[] }[];
  return axes.map((a) => `${a.name}: ${a.type}${a.data ? ` ${a.data.join('|')}` : ''}`).join('; ');
}

/** How long each trial ran (running ones up to `now`). */
export function durationsOption(trials: readonly Trial[], now: number): Option {
  const data: [number, number, string, string][] = [];
  for (const t of trials) {
    const seconds = trialDuration(t, now);   // the server's duration, as every view shows it
    if (seconds === undefined) continue;
    data.push([t.seq, seconds, t.id, t.status]);
  }
  return {
    ...BASE,
    grid: { left: 64, right: 24, top: 36, bottom: 40 },
    tooltip: {
      trigger: 'item',
      formatter: (p: { data: [number, number, string, string] }) =>
        `trial ${p.data[2]} (#${p.data[0]}) ${p.data[3]}<br/>${formatNumber(p.data[1], 4)} s`,
    },
    xAxis: { type: 'value', name: 'trial #', nameLocation: 'middle', nameGap: 26, minInterval: 1 },
    yAxis: { type: 'value', name: 'seconds' },
    dataZoom: [{ type: 'inside', xAxisIndex: 0, filterMode: 'none' }],
    // bars while they can be told apart, then points
    series: [data.length <= 500 ? {
      type: 'bar', name: 'duration', data, barMaxWidth: 12, encode: { x: 0, y: 1 }, itemStyle: { color: COLORS[0] },
    } : {
      type: 'scatter', name: 'duration', data, symbolSize: 3, large: data.length > 2000, largeThreshold: 2000,
      encode: { x: 0, y: 1 }, itemStyle: { color: COLORS[0], opacity: 0.7 },
    }],
  };
}
