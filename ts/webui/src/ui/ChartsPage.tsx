// Final results with the best so far, intermediate curves, parallel coordinates, durations.
// Options are rebuilt at most once a second while the experiment runs.
import { useMemo, useState } from 'preact/hooks';
import {
  countPoints, curvesOption, describeParallelAxes, durationsOption, finalOption, parallelOption, selectCurves, type CurvesMode,
} from '../charts/options';
import { useApp } from './app-context';
import { trialHref, useSubscribed, useThrottled } from './hooks';
import { LazyChart } from './LazyChart';
import { withBestMarked } from '../charts/analysis-options';
import { trialsUnderKey } from '../data/analysis';
import { ImportancePanel } from './ImportancePanel';
import { KeyChooser, useResultKey } from './ResultKey';
import { useBestTrialId } from './server-answers';

const MODES: [CurvesMode, string][] = [
  ['best', 'best'], ['latest', 'latest'], ['running', 'running'], ['selected', 'selected'], ['all', 'all'],
];

function openTrial(id: unknown) {
  if (typeof id === 'string' && id) location.hash = trialHref(id);
}

export function ChartsPage() {
  const { store, live } = useApp();
  // Redrawn at most once a second. While a large experiment is still loading (several pages),
  // the charts show what came first and are redrawn once it is all in: redrawing 10,000 trials
  // per page would slow the loading down.
  const loading = useSubscribed(live, () => live.busy);
  const trialsVersion = useThrottled(useSubscribed(store, () => (loading ? -1 : store.trialsVersion)), 1000);
  const metricsVersion = useThrottled(useSubscribed(store, () => (loading ? -1 : store.metricsVersion)), 1000);
  const experimentVersion = useSubscribed(store, () => store.experimentVersion);
  const loaded = useSubscribed(store, () => store.loaded);
  const trialsSoFar = useSubscribed(store, () => store.trials.length);
  const loadingHint = loading || !loaded ? `Loading trials… ${trialsSoFar.toLocaleString('en')} so far` : null;
  const [mode, setMode] = useState<CurvesMode>('best');
  const [count, setCount] = useState(20);
  const [selectedText, setSelectedText] = useState('');
  const [withOthers, setWithOthers] = useState(true);
  const [highlight, setHighlight] = useState<string | null>(null);

  const optimize = store.optimizeMode();
  const [resultKey, setResultKey] = useResultKey();
  const bestId = useBestTrialId(resultKey);
  // the charts of final results follow the chosen key (intermediate results are `default`'s)
  const trials = useMemo(() => trialsUnderKey(store.trials, resultKey), [trialsVersion, resultKey]);
  const keys = store.paramKeys();
  const space = store.experiment?.params?.searchSpace;
  const spaceKey = useMemo(() => JSON.stringify(space ?? null), [experimentVersion]);

  const final = useMemo(() => {
    const best = bestId === undefined ? undefined : trials.find((t) => t.id === bestId);
    return withBestMarked(finalOption(trials, optimize),
      best?.final === undefined ? undefined : { id: best.id, seq: best.seq, value: best.final });
  }, [trials, optimize, bestId]);
  const selected = useMemo(() => selectedText.split(/[\s,]+/).filter(Boolean), [selectedText]);
  const curves = useMemo(() => {
    const selection = selectCurves(trials, (id) => store.seriesOf(id), mode, count, selected, optimize, withOthers);
    return {
      option: curvesOption(selection, highlight), shown: selection.shown.length, others: selection.othersTotal,
      sampled: selection.others.length,
    };
  }, [trials, metricsVersion, mode, count, selected, optimize, withOthers, highlight]);
  const parallel = useMemo(() => parallelOption(trials, keys, space, optimize),
    [trials, spaceKey, keys, optimize]);
  const durations = useMemo(() => durationsOption(store.trials, Date.now()), [trialsVersion]);

  const toggleSelected = (id: string) => {
    const ids = new Set(selected);
    if (ids.has(id)) ids.delete(id);
    else ids.add(id);
    setSelectedText([...ids].join(', '));
    setMode('selected');
  };

  return (
    <section class="page charts-page">
      <div class="filterbar"><KeyChooser value={resultKey} onChange={setResultKey} /></div>
      <div class="card">
        <h2>Final results <span class="muted small">click a point to show its curve below; the pin marks the best trial</span></h2>
        <LazyChart option={final} testid="chart-final" points={countPoints(final)} best={bestId} loading={loadingHint}
                   onClick={(p) => {
                     const id = Array.isArray(p.data) ? p.data[2] : undefined;
                     if (typeof id === 'string') toggleSelected(id);
                   }} />
      </div>
      <div class="card">
        <h2>Intermediate results</h2>
        <div class="filterbar">
          <label>Show{' '}
            <select data-testid="curves-mode" value={mode} onChange={(e) => setMode(e.currentTarget.value as CurvesMode)}>
              {MODES.map(([value, label]) => <option value={value}>{label}</option>)}
            </select>
          </label>
          {(mode === 'best' || mode === 'latest') && (
            <label><input class="small" type="number" min={1} max={500} value={count} data-testid="curves-count"
                          onInput={(e) => setCount(Math.max(1, Math.min(500, Number(e.currentTarget.value) || 1)))} /> trials</label>
          )}
          {mode === 'selected' && (
            <input class="wide-input" placeholder="trial ids, comma separated" value={selectedText}
                   data-testid="curves-trials" onInput={(e) => setSelectedText(e.currentTarget.value)} />
          )}
          <label><input type="checkbox" checked={withOthers || mode === 'all'} disabled={mode === 'all'}
                        onChange={(e) => setWithOthers(e.currentTarget.checked)} data-testid="curves-others" /> others in grey</label>
          <span class="muted" data-testid="curves-summary">{loadingHint ? 'loading trials…' : <>{curves.shown} highlighted</>}
            {!loadingHint && curves.others ? `, ${curves.others} in grey` : ''}
            {!loadingHint && curves.sampled < curves.others ? ` (${curves.sampled} of them drawn)` : ''}</span>
          {highlight && <a href={trialHref(highlight)}>open trial {highlight}</a>}
        </div>
        <LazyChart option={curves.option} testid="chart-intermediate" points={countPoints(curves.option)} height={360}
                   loading={loadingHint}
                   onClick={(p) => { if (p.seriesName && p.seriesName !== 'other trials') setHighlight(p.seriesName === highlight ? null : p.seriesName); }} />
      </div>
      <div class="card">
        <h2>Hyperparameters <span class="muted small">drag along an axis to select a range</span></h2>
        <LazyChart option={parallel} testid="chart-parallel" points={countPoints(parallel)} height={380}
                   summary={describeParallelAxes(parallel)} loading={loadingHint} />
      </div>
      <ImportancePanel resultKey={resultKey} />
      <div class="card">
        <h2>Trial durations</h2>
        <LazyChart option={durations} testid="chart-durations" points={countPoints(durations)} loading={loadingHint}
                   onClick={(p) => openTrial(Array.isArray(p.data) ? p.data[2] : undefined)} />
      </div>
    </section>
  );
}
