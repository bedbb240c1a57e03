// The ECharts chunk: only the charts and components the UI uses (tree-shaken), and a component
// that draws an option into a canvas, keeping zoom when the data changes. Loaded on demand.
import { BarChart, LineChart, ParallelChart, ScatterChart } from 'echarts/charts';
import {
  DataZoomInsideComponent, GridComponent, ParallelComponent, TooltipComponent, VisualMapContinuousComponent,
} from 'echarts/components';
import { init, use, type ECharts } from 'echarts/core';
import { CanvasRenderer } from 'echarts/renderers';
import { useEffect, useRef, useState } from 'preact/hooks';
import { useTheme } from '../ui/theme';
import type { Option } from './options';

use([
  LineChart, ScatterChart, BarChart, ParallelChart, GridComponent, TooltipComponent, DataZoomInsideComponent,
  VisualMapContinuousComponent, ParallelComponent, CanvasRenderer,
]);

// Charts are given their options one per animation frame: four charts of 10,000 trials set
// at once would hold the page for one long frame.
const queue: (() => void)[] = [];
let scheduled = false;

function schedule(task: () => void): void {
  queue.push(task);
  if (scheduled) return;
  scheduled = true;
  const run = () => {
    queue.shift()?.();
    if (queue.length) requestAnimationFrame(run);
    else scheduled = false;
  };
  requestAnimationFrame(run);
}

function echartsTheme(colourTheme: 'light' | 'dark'): string {
  return colourTheme === 'dark' ? 'dark' : 'default';
}

export interface EChartProps {
  option: Option;
  testid?: string;
  height?: number;
  points?: number;
  /** The best trial's id, drawn marked (data-best, for tests). */
  best?: string;
  /** What the chart shows in words (its axes), for tests and tools: `data-summary`. */
  summary?: string;
  /** Called with the data item or the series name clicked. */
  onClick?: (params: { seriesName?: string; data?: unknown; seriesType?: string }) => void;
}

export function EChart({ option, testid, height = 320, points, best, summary, onClick }: EChartProps) {
  const ref = useRef<HTMLDivElement>(null);
  const chart = useRef<ECharts | null>(null);
  const clickRef = useRef(onClick);
  clickRef.current = onClick;
  const [rendered, setRendered] = useState(false);
  const { resolved: colourTheme } = useTheme();
  const drawnTheme = useRef(colourTheme);

  useEffect(() => {
    const el = ref.current!;
    const c = init(el, echartsTheme(drawnTheme.current), { renderer: 'canvas' });
    chart.current = c;
    c.on('finished', () => setRendered(true));
    c.on('click', (p) => clickRef.current?.(p as Parameters<NonNullable<EChartProps['onClick']>>[0]));
    const observer = typeof ResizeObserver === 'undefined' ? null : new ResizeObserver(() => c.resize());
    observer?.observe(el);
    return () => {
      observer?.disconnect();
      chart.current = null;
      // A large series is painted over several frames, and a frame still to come fails on a
      // disposed chart; painting the emptied chart now makes that frame a no-op.
      c.clear();
      c.getZr().refreshImmediately();
      c.dispose();
    };
  }, []);

  // ECharts' own dark theme (axes, labels, tooltips) in the dark colour theme, switched in place (the zoom stays)
  useEffect(() => {
    if (!chart.current || drawnTheme.current === colourTheme) return;
    drawnTheme.current = colourTheme;
    chart.current.setTheme(echartsTheme(colourTheme));
  }, [colourTheme]);

  // a chart out of view is not updated (a page of four charts of 10,000 trials each would
  // redraw them all on every change); it catches up when scrolled into view
  const [visible, setVisible] = useState(true);
  const applied = useRef<Option | null>(null);
  useEffect(() => {
    const el = ref.current!;
    if (typeof IntersectionObserver === 'undefined') return undefined;
    const observer = new IntersectionObserver((entries) => setVisible(entries.some((e) => e.isIntersecting)),
      { rootMargin: '200px' });
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  const latest = useRef(option);
  latest.current = option;
  const pending = useRef(false);
  useEffect(() => {
    if (!chart.current || !visible || applied.current === option || pending.current) return;
    pending.current = true;
    schedule(() => {
      pending.current = false;
      const c = chart.current;
      if (!c || applied.current === latest.current) return;
      applied.current = latest.current;
      // replaceMerge keeps the zoom while the data changes
      c.setOption(latest.current, { replaceMerge: ['series', 'parallelAxis', 'xAxis', 'yAxis'] });
    });
  }, [option, visible]);

  return (
    <div ref={ref} class="chart" style={{ height: `${height}px` }} data-testid={testid}
         data-rendered={rendered ? 'true' : undefined} data-points={points} data-best={best} data-summary={summary}
         data-theme={colourTheme} />
  );
}
