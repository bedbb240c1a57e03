// The overview's card of the K best trials under the chosen result key, by the server's rule
// for the best (the optimize mode applied to that key; finite results only).
import { useState } from 'preact/hooks';
import { formatNumber, formatParam } from '../data/query';
import { tid } from '../testids';
import { useApp } from './app-context';
import { trialHref } from './hooks';
import { KeyChooser, useResultKey } from './ResultKey';
import { useTopTrials } from './server-answers';

export const TOP_DEFAULT = 10;
export const TOP_MAX = 100;

export function TopTrials() {
  const { store } = useApp();
  const [resultKey, setResultKey] = useResultKey();
  const [text, setText] = useState(String(TOP_DEFAULT));
  const parsed = Number(text);
  const valid = Number.isInteger(parsed) && parsed >= 1 && parsed <= TOP_MAX;
  const [count, setCount] = useState(TOP_DEFAULT);
  const top = useTopTrials(resultKey, count);
  const answer = top.answer?.key === resultKey ? top.answer : null;
  const names = store.paramKeys();

  return (
    <div class="card wide" data-testid="top-trials">
      <h2>Top trials</h2>
      <div class="filterbar">
        <label>K <input class="small" type="number" min={1} max={TOP_MAX} value={text} data-testid="top-k"
                        aria-invalid={!valid} aria-describedby="top-k-hint"
                        onInput={(e) => {
                          const value = e.currentTarget.value;
                          setText(value);
                          const n = Number(value);
                          if (Number.isInteger(n) && n >= 1 && n <= TOP_MAX) setCount(n);
                        }} /></label>
        <KeyChooser value={resultKey} onChange={setResultKey} />
        <span id="top-k-hint" class={valid ? 'muted' : 'error-text'}>
          {valid ? `the ${answer?.optimizeMode === 'minimize' ? 'lowest' : 'highest'} results first`
            : `K: a whole number from 1 to ${TOP_MAX}`}
        </span>
      </div>
      {top.error && <p class="error-text" data-testid="top-trials-status">{top.error}</p>}
      {!top.error && !answer && <p class="muted" data-testid="top-trials-status">Loading…</p>}
      {answer && answer.trials.length === 0 && <p class="muted" data-testid="top-trials-status">No finite result yet.</p>}
      {answer && answer.trials.length > 0 && (
        <div class="table-scroll" tabIndex={0} role="region" aria-label="The best trials">
          <table class="compare-table">
            <thead>
              <tr><th scope="col">Rank</th><th scope="col">Trial</th><th scope="col">Result{resultKey !== 'default' ? ` (${resultKey})` : ''}</th>
                {names.map((name) => <th scope="col">{name}</th>)}</tr>
            </thead>
            <tbody>
              {answer.trials.map((t, i) => {
                const trial = store.trial(t.trialJobId);
                return (
                  <tr data-testid={tid.topTrial(i + 1)} data-trial={t.trialJobId}>
                    <td class="num">{i + 1}</td>
                    <td><a href={trialHref(t.trialJobId)}>{t.trialJobId}</a> <span class="muted">#{t.sequenceId}</span></td>
                    <td class="num">{formatNumber(t.number)}</td>
                    {names.map((name) => <td>{trial ? formatParam(trial.params[name]) : ''}</td>)}
                  </tr>
                );
              })}
            </tbody>
          </table>
          <p class="muted small">{answer.trials.length} of {answer.scored} trials with a finite result</p>
        </div>
      )}
    </div>
  );
}
