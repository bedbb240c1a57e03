// Draws a chart once the ECharts chunk has loaded (it is not part of the first page load).
import { useEffect, useState } from 'preact/hooks';
import type { EChartProps } from '../charts/EChart';

type ChartModule = typeof import('../charts/EChart');

let loaded: ChartModule | null = null;
let loading: Promise<ChartModule> | null = null;

export function loadCharts(): Promise<ChartModule> {
  loading ??= import('../charts/EChart').then((m) => (loaded = m));
  return loading;
}

export function LazyChart(props: EChartProps) {
  const [mod, setMod] = useState<ChartModule | null>(loaded);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!mod) loadCharts().then(setMod, (err) => setError(String(err)));
  }, []);
  if (!mod) {
    return (
      <div class="chart chart-loading" style={{ height: `${props.height ?? 320}px` }} data-testid={props.testid}>
        {error ?? 'Loading chart…'}
      </div>
    );
  }
  return <mod.EChart {...props} />;
}
