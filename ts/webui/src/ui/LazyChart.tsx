// Draws a chart once the ECharts chunk has loaded (it is not part of the first page load).
import { useEffect, useState } from 'preact/hooks';
import type { EChartProps } from '../charts/EChart';
import { testids } from '../testids';

type ChartModule = typeof import('../charts/EChart');

let loaded: ChartModule | null = null;
let loading: Promise<ChartModule> | null = null;

export function loadCharts(): Promise<ChartModule> {
  loading ??= import('../charts/EChart').then((m) => (loaded = m));
  return loading;
}

export interface LazyChartProps extends EChartProps {
  /** A hint shown over the chart while its data is still loading (e.g. "Loading trials…"). */
  loading?: string | null;
}

export function LazyChart({ loading, ...props }: LazyChartProps) {
  // always in the box, so that the chart is not drawn anew when the hint goes
  return (
    <div class="chart-box">
      <ChartOrPlaceholder {...props} />
      {loading && <div class="chart-overlay" role="status" data-testid={testids.chartLoading}>{loading}</div>}
    </div>
  );
}

function ChartOrPlaceholder(props: EChartProps) {
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
