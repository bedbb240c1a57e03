// The ECharts chunk: only the charts and components the UI uses (tree-shaken), and a component
// that draws an option into a canvas, keeping zoom when the data changes. Loaded on demand.
import { BarChart, LineChart, ParallelChart, ScatterChart } from 'echarts/charts';
import {
  DataZoomInsideComponent, GridComponent, ParallelComponent, TooltipComponent, VisualMapContinuousComponent,
} from 'echarts/components';
import { init, use, type ECharts } from 'echarts/core';
import { CanvasRenderer } from 'echarts/renderers';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Option } from './options';

use([
  LineChart, ScatterChart, BarChart, ParallelChart, GridComponent, TooltipComponent, DataZoomInsideComponent,
  VisualMapContinuousComponent, ParallelComponent, CanvasRenderer,
]);

export interface EChartProps {
  option: Option;
  testid?: string;
  height?: number;
  points?: number;
  /** Called with the data item or the series name clicked. */
  onClick?: (params: { seriesName?: string; data?: unknown; seriesType?: string }) => void;
}

export function EChart({ option, testid, height = 320, points, onClick }: EChartProps) {
  const ref = useRef<HTMLDivElement>(null);
  const chart = useRef<ECharts | null>(null);
  const clickRef = useRef(onClick);
  clickRef.current = onClick;
  const [rendered, setRendered] = useState(false);

  useEffect(() => {
    const el = ref.current!;
    const c = init(el, undefined, { renderer: 'canvas' });
    chart.current = c;
    c.on('finished', () => setRendered(true));
    c.on('click', (p) => clickRef.current?.(p as Parameters<NonNullable<EChartProps['onClick']>>[0]));
    const observer = typeof ResizeObserver === 'undefined' ? null : new ResizeObserver(() => c.resize());
    observer?.observe(el);
    return () => {
      observer?.disconnect();
      c.dispose();
      chart.current = null;
    };
  }, []);

  useEffect(() => {
    // replaceMerge keeps the zoom and the legend state while the data changes
    chart.current?.setOption(option, { replaceMerge: ['series', 'parallelAxis', 'xAxis', 'yAxis'], lazyUpdate: true });
  }, [option]);

  return (
    <div ref={ref} class="chart" style={{ height: `${height}px` }} data-testid={testid}
         data-rendered={rendered ? 'true' : undefined} data-points={points} />
  );
}
