// Chart options of the analysis views: the compared trials' curves overlaid, importance bars,
// and the best trial marked on the final-results chart.
import { formatNumber } from '../data/query';
import type { ImportanceAnswer, Series } from '../data/types';
import type { Option } from './options';

/** One colour per compared trial (at most 10), also shown beside its column in the table. */
export const COMPARE_COLORS = ['#3b6fd8', '#e8684a', '#2e8b57', '#9a60b4', '#b7791f', '#1d8fa3', '#d94f8a',
  '#5f6b7a', '#7a5c2e', '#4b5fc4'];

export function compareCurvesOption(curves: { id: string; series: Series }[]): Option {
  return {
    animation: false,
    color: COMPARE_COLORS,
    textStyle: { fontFamily: 'inherit' },
    grid: { left: 64, right: 24, top: 24, bottom: 40 },
    tooltip: { trigger: 'axis', valueFormatter: (v: number) => formatNumber(v) },
    xAxis: { type: 'value', name: 'step', nameLocation: 'middle', nameGap: 26, minInterval: 1 },
    yAxis: { type: 'value', scale: true },
    series: curves.map(({ id, series }) => ({
      type: 'line', name: id, showSymbol: series.seq.length < 50, data: series.seq.map((s, i) => [s, series.value[i]]),
    })),
  };
}

export function importanceOption(answer: ImportanceAnswer): Option {
  // ECharts draws a category axis bottom-up: reversed, the most important bar is on top
  const rows = [...answer.parameters].reverse();
  return {
    animation: false,
    textStyle: { fontFamily: 'inherit' },
    grid: { left: 140, right: 48, top: 12, bottom: 32, containLabel: false },
    tooltip: { trigger: 'item', formatter: (p: { name: string; value: number }) => `${p.name}: ${formatNumber(p.value, 3)}` },
    xAxis: { type: 'value', min: 0, max: 1 },
    yAxis: { type: 'category', data: rows.map((p) => p.name), axisLabel: { width: 130, overflow: 'truncate' } },
    series: [{
      type: 'bar', name: 'importance', data: rows.map((p) => p.importance), itemStyle: { color: '#3b6fd8' },
      label: { show: true, position: 'right', formatter: (p: { value: number }) => formatNumber(p.value, 2) },
    }],
  };
}

/** `option` (the final-results chart) with the best trial's point drawn over it as a star. */
export function withBestMarked(option: Option, best: { id: string; seq: number; value: number } | undefined): Option {
  if (!best) return option;
  return {
    ...option,
    series: [...option.series, {
      type: 'scatter', name: 'best trial', symbol: 'pin', symbolSize: 30, z: 10, itemStyle: { color: '#c8372d' },
      data: [[best.seq, best.value, best.id]],
      label: { show: true, position: 'top', formatter: 'best' },
    }],
  };
}
