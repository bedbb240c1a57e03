// One trial: its parameters, attempts, intermediate and final results, and its files tailed live.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { trialCurveOption, countPoints } from '../charts/options';
import { FINISHED_STATES, parseTrial, trialDuration } from '../data/parse';
import { formatNumber, formatParam } from '../data/query';
import type { AttemptView, LogFile, Trial } from '../data/types';
import { tid } from '../testids';
import { useApp } from './app-context';
import { useConfirm } from './confirm';
import { LogDownload } from './Downloads';
import { formatDuration, formatTime } from './format';
import { useNow, useSubscribed, useThrottled } from './hooks';
import { LazyChart } from './LazyChart';
import { LogView } from './LogView';
import { StateBadge } from './StateBadge';
import { AddTrialButton } from './TrialForm';
import { UNREACHABLE_REASON, useUnreachableSince } from './Unreachable';

const FILES: LogFile[] = ['stdout', 'stderr', 'trial.log'];

function Attempts({ trial, details }: { trial: Trial; details: AttemptView[] | undefined }) {
  if (!details || !details.length) {
    return <p data-testid="trial-attempts">{trial.attempts} attempt{trial.attempts === 1 ? '' : 's'}</p>;
  }
  return (
    <div class="scroll-x" tabIndex={0} role="region" aria-label="Attempts">
      <table class="grid" data-testid="trial-attempts">
        <thead><tr><th>#</th><th>State</th><th>Node</th><th>Started</th><th>Ended</th><th>Exit code</th><th>Signal</th></tr></thead>
        <tbody>
          {details.map((a, i) => (
            <tr>
              <td>{a.attempt ?? i + 1}</td>
              <td>{a.status ? <StateBadge state={a.status} /> : ''}</td>
              <td data-testid={tid.attemptHost(a.attempt ?? i + 1)}>{a.host ?? ''}</td>
              <td>{formatTime(a.startTime)}</td>
              <td>{formatTime(a.endTime)}</td>
              <td>{a.exitCode ?? ''}</td>
              <td>{a.signal ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function TrialDetail({ trialId }: { trialId: string }) {
  const { store, api } = useApp();
  const trial = useSubscribed(store, () => store.trial(trialId));
  const seriesRev = useThrottled(useSubscribed(store, () => store.seriesRevision(trialId)), 500);
  // a failed trial says why in its stderr: open on it (once the trial is known; a choice made stays)
  const [chosenFile, setFile] = useState<LogFile | null>(null);
  const file: LogFile = chosenFile ?? (trial?.status === 'FAILED' ? 'stderr' : 'stdout');
  const [fetched, setFetched] = useState<Trial | null>(null);
  const confirm = useConfirm();
  const readOnly = useSubscribed(store, () => store.readOnly);
  const unreachableSince = useUnreachableSince();
  const now = Math.min(useNow(1000, trial?.status === 'RUNNING' && unreachableSince === null), unreachableSince ?? Infinity);
  const status = trial?.status;

  // the single-trial route may list attempts with exit codes where the bulk views do not
  useEffect(() => {
    let alive = true;
    api.trial(trialId).then((view) => { if (alive) setFetched(parseTrial(view)); }, () => undefined);
    return () => { alive = false; };
  }, [trialId, status]);

  const option = useMemo(() => trialCurveOption(store.seriesOf(trialId), trial?.final), [seriesRev, trial?.final, trialId]);

  if (!trial) {
    return (
      <section class="page">
        <p class="empty">{store.loaded ? `No trial ${trialId}.` : 'Loading…'} <a href="#/trials">All trials</a></p>
      </section>
    );
  }
  const latest = store.latest(trialId);
  const details = trial.attemptDetails ?? fetched?.attemptDetails;

  return (
    <section class="page trial-detail" data-testid="trial-detail">
      <div class="title-row">
        <a href="#/trials" class="muted">← trials</a>
        <h1>Trial <span data-testid="trial-detail-id">{trial.id}</span> <span class="muted">#{trial.seq}</span></h1>
        <StateBadge state={trial.status} testid="trial-detail-state" />
        {store.experiment?.bestTrialId === trial.id && (
          <span class="badge best" data-testid="trial-best-badge" title="the best final result of the experiment">★ best trial</span>
        )}
        {readOnly === false && trial.canKill && (
          <button type="button" class="danger" data-testid="kill-trial" disabled={unreachableSince !== null}
                  title={unreachableSince !== null ? UNREACHABLE_REASON : undefined}
                  onClick={() => confirm.ask(<>Kill trial <b>{trial.id}</b>? It ends as USER_CANCELED.</>,
                    () => api.killTrial(trial.id), `Trial ${trial.id} is being stopped.`, 'Kill this trial?')}>
            Kill trial
          </button>
        )}
        <AddTrialButton initial={trial.params} label="Clone" testid="clone-trial" title={`Clone trial ${trial.id}`} />
      </div>
      {confirm.view}
      {trial.waitingReason !== undefined && (
        <p class="waiting-reason" data-testid="trial-waiting-reason">{trial.waitingReason}</p>
      )}
      <div class="cards">
        <div class="card">
          <h2>Result</h2>
          <dl class="facts">
            <dt>Final</dt><dd data-testid="trial-final">{trial.final !== undefined ? formatNumber(trial.final)
              : trial.finalRaw !== undefined ? JSON.stringify(trial.finalRaw) : '—'}</dd>
            {trial.finalRaw !== undefined && typeof trial.finalRaw === 'object' && (
              <><dt>Reported</dt><dd class="mono">{JSON.stringify(trial.finalRaw)}</dd></>
            )}
            <dt>Latest</dt><dd data-testid="trial-latest">{latest === undefined ? '—' : formatNumber(latest)}
              {latest !== undefined && trial.final === undefined && FINISHED_STATES.has(trial.status) && (
                <span class="muted"> (last intermediate result; no final result)</span>
              )}</dd>
            <dt>Node</dt><dd data-testid="trial-host" title="where its latest attempt ran">{trial.host ?? '—'}</dd>
            <dt>Submitted</dt><dd>{formatTime(trial.submitTime)}</dd>
            <dt>Started</dt><dd>{formatTime(trial.startTime)}</dd>
            <dt>Ended</dt><dd>{formatTime(trial.endTime)}</dd>
            <dt>Duration</dt><dd data-testid="trial-duration">{formatDuration(trialDuration(trial, now))}</dd>
          </dl>
        </div>
        <div class="card">
          <h2>Parameters</h2>
          <table class="kv" data-testid="trial-params">
            <tbody>
              {Object.entries(trial.params).map(([k, v]) => <tr><th>{k}</th><td>{formatParam(v)}</td></tr>)}
            </tbody>
          </table>
        </div>
        <div class="card">
          <h2>Attempts</h2>
          <Attempts trial={trial} details={details} />
        </div>
      </div>
      <div class="card">
        <h2>Intermediate results</h2>
        {store.seriesOf(trialId).value.length ? (
          <LazyChart option={option} testid="chart-trial-intermediate" points={countPoints(option)} height={260} />
        ) : (
          <p class="muted" data-testid="chart-trial-intermediate" data-points={0}>No intermediate result reported.</p>
        )}
      </div>
      <div class="card">
        <div class="tabs">
          {FILES.map((f) => (
            <button type="button" class={`tab ${f === file ? 'active' : ''}`} data-testid={tid.logTab(f)}
                    onClick={() => setFile(f)}>{f}</button>
          ))}
        </div>
        <LogDownload file={file} trial={trialId} />
        <LogView key={`${trialId}/${file}`} file={file} trial={trialId} fitContent />
      </div>
    </section>
  );
}
