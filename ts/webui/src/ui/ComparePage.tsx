// Compare 2-10 trials side by side (#/compare/<id>,<id>,...): one table (parameters, the
// differing ones marked; final result under the chosen key; best intermediate result;
// duration; state) and their intermediate curves overlaid in one chart.
import { useMemo } from 'preact/hooks';
import { COMPARE_COLORS, compareCurvesOption } from '../charts/analysis-options';
import { countPoints } from '../charts/options';
import { bestIntermediate, differingParams, parseCompareIds, resultOf } from '../data/analysis';
import { trialDuration } from '../data/parse';
import { formatNumber, formatParam } from '../data/query';
import type { Trial } from '../data/types';
import { tid } from '../testids';
import { useApp } from './app-context';
import { formatDuration } from './format';
import { trialHref, useSubscribed } from './hooks';
import { LazyChart } from './LazyChart';
import { KeyChooser, useResultKey } from './ResultKey';
import { useBestTrialId } from './server-answers';
import { StateBadge } from './StateBadge';

export function ComparePage({ ids: idsText }: { ids: string }) {
  const { store } = useApp();
  const trialsVersion = useSubscribed(store, () => store.trialsVersion);
  const metricsVersion = useSubscribed(store, () => store.metricsVersion);
  const loaded = useSubscribed(store, () => store.loaded);
  const [resultKey, setResultKey] = useResultKey();
  const bestId = useBestTrialId(resultKey);
  const mode = store.optimizeMode();
  const { ids, error } = useMemo(() => parseCompareIds(idsText), [idsText]);
  const trials = useMemo(() => ids.map((id) => store.trial(id)).filter((t): t is Trial => t !== undefined),
    [ids, trialsVersion]);
  const unknown = loaded ? ids.filter((id) => !store.trial(id)) : [];
  const names = store.paramKeys().filter((name) => trials.some((t) => name in t.params));
  const differing = useMemo(() => differingParams(trials, names), [trials, names]);
  const curves = useMemo(() => compareCurvesOption(trials.map((t) => ({ id: t.id, series: store.seriesOf(t.id) }))),
    [trials, metricsVersion]);

  const refusal = error ?? (unknown.length ? `No trial ${unknown.join(', ')} in this experiment.` : null);
  const now = Date.now();
  return (
    <section class="page compare-page" data-testid="compare-page">
      <div class="card">
        <h1>Compare trials</h1>
        <div class="filterbar">
          <a href="#/trials">Back to the trials</a>
          <KeyChooser value={resultKey} onChange={setResultKey} />
          <span class="muted">Parameters marked ≠ differ among these trials.</span>
        </div>
        {refusal && <p class="error-text" role="alert" data-testid="compare-error">{refusal}</p>}
        {!error && !loaded && <p class="muted">Loading…</p>}
        {!error && trials.length > 0 && (
          <div class="table-scroll" tabIndex={0} role="region" aria-label="The compared trials, side by side">
            <table class="compare-table" data-testid="compare-table">
              <thead>
                <tr>
                  <th scope="col">Trial</th>
                  {trials.map((t, i) => (
                    <th scope="col">
                      <span class="swatch" style={{ background: COMPARE_COLORS[i % COMPARE_COLORS.length] }} aria-hidden="true" />
                      <a href={trialHref(t.id)}>{t.id}</a> <span class="muted">#{t.seq}</span>
                      {t.id === bestId && <span class="best-mark" title="the best trial"> ★ best</span>}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                <tr><th scope="row">State</th>{trials.map((t) => <td><StateBadge state={t.status} /></td>)}</tr>
                <tr>
                  <th scope="row">Result{resultKey !== 'default' ? ` (${resultKey})` : ''}</th>
                  {trials.map((t) => <td class="num" data-testid={tid.compareFinal(t.id)}>{formatNumber(resultOf(t, resultKey)) || '—'}</td>)}
                </tr>
                <tr>
                  <th scope="row">Best intermediate <span class="muted">({mode})</span></th>
                  {trials.map((t) => <td class="num">{formatNumber(bestIntermediate(store.seriesOf(t.id), mode)) || '—'}</td>)}
                </tr>
                <tr><th scope="row">Duration</th>{trials.map((t) => <td class="num">{formatDuration(trialDuration(t, now)) || '—'}</td>)}</tr>
                {names.map((name) => {
                  const differs = differing.has(name);
                  return (
                    <tr class={differs ? 'differs' : ''} data-testid={tid.compareParam(name)} data-differs={differs ? 'true' : 'false'}>
                      <th scope="row">{differs && <span title="differs among these trials">≠ </span>}{name}</th>
                      {trials.map((t) => <td>{name in t.params ? formatParam(t.params[name]) : '—'}</td>)}
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </div>
      {!error && trials.length > 0 && (
        <div class="card">
          <h2>Intermediate results</h2>
          <LazyChart option={curves} testid="chart-compare" points={countPoints(curves)} height={340} />
        </div>
      )}
    </section>
  );
}
