// Hyperparameter importance on the charts page: the server's PED-ANOVA answer as bars, with
// the same numbers in a table (a canvas says nothing to a screen reader), a loading hint and
// the server's reason when there is none.
import { useMemo } from 'preact/hooks';
import { importanceOption } from '../charts/analysis-options';
import { countPoints } from '../charts/options';
import { formatNumber } from '../data/query';
import { tid } from '../testids';
import { LazyChart } from './LazyChart';
import { useImportance } from './server-answers';

export function ImportancePanel({ resultKey }: { resultKey: string }) {
  const { answer: fetched, error, loading } = useImportance(resultKey);
  const answer = fetched?.key === resultKey ? fetched : null;
  const option = useMemo(() => (answer && answer.parameters.length ? importanceOption(answer) : null), [answer]);
  const status = error ? `No importance: ${error}`
    : !answer ? 'Computing importance…'
    : answer.reason ? `No importance: ${answer.reason}.` : '';
  return (
    <div class="card" data-testid="importance-panel">
      <h2>Hyperparameter importance <span class="muted small">PED-ANOVA: how much each parameter sets the best {answer ? Math.round(answer.gamma * 100) : 10}% of trials apart</span></h2>
      {status && <p class={error ? 'error-text' : 'muted'} data-testid="importance-status" aria-live="polite">{status}</p>}
      {loading && answer && <p class="muted small" aria-live="polite">Updating…</p>}
      {answer && (answer.parameters.length > 0 || answer.skipped.length > 0) && (
        <>
          {option && <LazyChart option={option} testid="chart-importance" points={countPoints(option)}
                                height={Math.max(120, 36 * answer.parameters.length + 48)} />}
          <p class="muted small">
            {answer.trials} trials with a finite result under “{answer.key}”, {answer.topTrials} of them in the
            best γ = {answer.gamma} ({answer.optimizeMode}).
          </p>
          <table class="kv importance-table" aria-label="Importance of each parameter">
            <tbody>
              {answer.parameters.map((p) => (
                <tr data-testid={tid.importanceParam(p.name)}><th scope="row">{p.name}</th><td class="num">{formatNumber(p.importance, 3)}</td></tr>
              ))}
              {answer.skipped.map((p) => (
                <tr><th scope="row">{p.name}</th><td class="muted">not scored: {p.reason}</td></tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </div>
  );
}
