// The experiment at a glance: what it is, how far it got, its best result, its config.
import { useMemo } from 'preact/hooks';
import { EXPERIMENT_FINISHED, TRIAL_STATES, parseDuration } from '../data/parse';
import { formatNumber, formatParam } from '../data/query';
import { trialsInStateHref } from '../data/trials-url';
import type { ExperimentView } from '../data/types';
import { tid } from '../testids';
import { useApp } from './app-context';
import { ConfigView } from './ConfigView';
import { Controls } from './Controls';
import { ResultsDownloads } from './Downloads';
import { formatAway, formatDuration, formatTime, formatTimeSpan } from './format';
import { trialHref, useNow, useSubscribed } from './hooks';
import { SearchSpaceEditor } from './SearchSpaceEditor';
import { StateBadge } from './StateBadge';
import { TopTrials } from './TopTrials';
import { useUnreachableSince } from './Unreachable';

/** Seconds the experiment has run, ticking while it runs. */
export function experimentSeconds(exp: ExperimentView, receivedAt: number, now: number): number {
  const base = exp.execDuration ?? 0;
  if (EXPERIMENT_FINISHED.has(exp.status) || exp.status === 'INITIALIZED') return base;
  return base + Math.max(0, (now - receivedAt) / 1000);
}

function Progress({ used, max, testid, text }: { used: number; max: number | undefined; testid: string; text: string }) {
  const pct = max && max > 0 ? Math.min(100, (100 * used) / max) : 0;
  return (
    <div class="progress-row">
      <div class="progress"><div class="progress-fill" style={{ width: `${pct}%` }} /></div>
      <span data-testid={testid}>{text}</span>
    </div>
  );
}

/** How long no manager ran the experiment (the server's gaps and total), each gap's start and end
 *  folded under it. */
function ManagerAway({ exp }: { exp: ExperimentView }) {
  const gaps = exp.managerAway ?? [];
  return (
    <details class="away-details">
      <summary data-testid="manager-away">{formatAway(exp.managerAwaySeconds ?? 0, gaps.length)}</summary>
      <ul class="away-gaps" data-testid="manager-away-gaps">
        {gaps.map((gap) => <li>{formatTimeSpan(gap.from * 1000, gap.to * 1000)}</li>)}
      </ul>
    </details>
  );
}

export function Overview() {
  const { store } = useApp();
  const experimentVersion = useSubscribed(store, () => store.experimentVersion);
  const trialsVersion = useSubscribed(store, () => store.trialsVersion);
  const exp = store.experiment;
  const running = !!exp && !EXPERIMENT_FINISHED.has(exp.status);
  const unreachableSince = useUnreachableSince();
  // the duration stops where the server stopped answering: nothing is known after that
  const now = Math.min(useNow(1000, running && unreachableSince === null), unreachableSince ?? Infinity);
  const mode = store.optimizeMode();
  const best = useMemo(() => store.bestTrial(), [trialsVersion, experimentVersion]);

  if (!exp) return <section class="page"><p class="empty">Loading…</p></section>;

  const params = exp.params ?? {};
  const seconds = experimentSeconds(exp, store.experimentReceivedAt, now);
  const maxSeconds = parseDuration(params.maxExperimentDuration);
  const maxTrials = typeof params.maxTrialNumber === 'number' ? params.maxTrialNumber : undefined;
  const trialsUsed = exp.nextSequenceId ?? store.trials.length;
  const counts = store.counts();

  return (
    <section class="page overview" data-testid="overview">
      {exp.status === 'ERROR' && exp.error && (
        <div class="card error-card">
          <h2>Error</h2>
          <pre data-testid="experiment-error" tabIndex={0} role="region" aria-label="Error">{exp.error}</pre>
        </div>
      )}
      <div class="cards">
        <div class="card">
          <h2>Experiment</h2>
          <dl class="facts">
            <dt>Name</dt><dd>{params.experimentName ?? <span class="muted">(none)</span>}</dd>
            <dt>Id</dt><dd>{exp.id}</dd>
            <dt>Status</dt><dd>{unreachableSince === null ? <StateBadge state={exp.status} />
              : <span>unknown: no answer since {formatTime(unreachableSince)} (last
                known: {exp.status})</span>}</dd>
            <dt>Started</dt><dd data-testid="start-time">{formatTime(exp.startTime)}</dd>
            {exp.endTime !== undefined && <><dt>Ended</dt><dd>{formatTime(exp.endTime)}</dd></>}
            <dt>Duration</dt><dd data-testid="duration">{formatDuration(seconds)}</dd>
            {!!exp.managerAway?.length && <><dt>Manager away</dt><dd><ManagerAway exp={exp} /></dd></>}
            <dt>Concurrency</dt><dd data-testid="concurrency">{params.trialConcurrency ?? ''}</dd>
            <dt>Max trials</dt><dd data-testid="max-trials">{maxTrials ?? 'no limit'}</dd>
            <dt>Max duration</dt><dd data-testid="max-duration">{Number.isNaN(maxSeconds) ? 'no limit' : formatDuration(maxSeconds)}</dd>
            <dt>Optimize</dt><dd data-testid="optimize-mode">{mode}</dd>
          </dl>
        </div>
        <div class="card">
          <h2>Budget</h2>
          <div class="budget">
            <span>Trials</span>
            <Progress used={trialsUsed} max={maxTrials} testid="budget-trials"
                      text={`${trialsUsed} / ${maxTrials ?? '∞'}`} />
            <span>Time</span>
            <Progress used={seconds} max={Number.isNaN(maxSeconds) ? undefined : maxSeconds} testid="budget-time"
                      text={`${formatDuration(seconds)} / ${Number.isNaN(maxSeconds) ? '∞' : formatDuration(maxSeconds)}`} />
          </div>
          <h3>Trials by state</h3>
          <div class="counts">
            {TRIAL_STATES.filter((s) => counts[s]).map((s) => (
              <a class="count" href={trialsInStateHref(s)} data-testid={tid.countLink(s)}>
                <StateBadge state={s} /> <b data-testid={tid.count(s)}>{counts[s]}</b>
              </a>
            ))}
            {!Object.keys(counts).length && <span class="muted">No trial yet.</span>}
          </div>
        </div>
        <div class="card">
          <h2>Best result</h2>
          {best ? (
            <>
              <p class="best">
                <b data-testid="best-result">{formatNumber(best.final)}</b>{' '}
                <a href={trialHref(best.id)} data-testid="best-trial">trial {best.id}</a>{' '}
                <span class="muted">#{best.seq}</span>
              </p>
              <table class="kv" data-testid="best-params">
                <tbody>
                  {Object.entries(best.params).map(([k, v]) => <tr><th>{k}</th><td>{formatParam(v)}</td></tr>)}
                </tbody>
              </table>
            </>
          ) : <p class="muted" data-testid="best-result">No final result yet.</p>}
          <p class="card-foot"><ResultsDownloads /></p>
        </div>
      </div>
      <Controls />
      <div class="cards"><TopTrials /></div>
      <div class="cards">
        <SearchSpaceEditor />
        <ConfigView />
      </div>
    </section>
  );
}
