// All experiments of the registry (`expctl ui`'s page, and #/experiments on an experiment's own server):
// state, name, id, platform, best, trials, start, duration; open, stop, resume, delete. The server
// decides every fact and which actions apply (expmgr/server/home.py); stop and delete ask first.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Api } from '../data/api';
import { actOnExperiment, listExperiments, type ExperimentAction, type ExperimentRecord } from '../data/experiments';
import { formatNumber } from '../data/query';
import { useConfirm } from './confirm';
import { formatDuration, formatTime } from './format';
import { StateBadge } from './StateBadge';
import './experiments.css';

const REFRESH_MS = 3000;

function trialsText(record: ExperimentRecord): string {
  const parts = Object.entries(record.trials).map(([state, count]) => `${count} ${state.toLowerCase()}`);
  return parts.length ? `${record.trialCount}: ${parts.join(', ')}` : '0';
}

function bestText(record: ExperimentRecord): string {
  return record.best ? `${formatNumber(record.best.value)} (trial ${record.best.trialId})` : '—';
}

function Row({ record, act }: { record: ExperimentRecord; act: (record: ExperimentRecord, action: ExperimentAction) => void }) {
  const label = record.name ? `${record.name} (${record.id})` : record.id;
  const crashed = record.state === 'CRASHED';
  const openText = record.openKind === 'live' ? 'Open live' : 'Open read-only';
  return (
    <tr data-testid={`experiment-row-${record.id}`} data-state={record.state}>
      <td><StateBadge state={record.state} testid={`experiment-state-${record.id}`} /></td>
      <td class="exp-list-name">{record.name ?? ''}</td>
      <td class="mono">{record.id}</td>
      <td>{record.platform ?? ''}</td>
      <td class="mono">{bestText(record)}</td>
      <td>{trialsText(record)}</td>
      <td>{formatTime(record.startTime ?? undefined)}</td>
      <td>{formatDuration(record.duration ?? undefined)}</td>
      <td class="exp-list-actions">
        {record.open && (
          <a href={record.open} class="exp-open" data-testid={`experiment-open-${record.id}`} data-kind={record.openKind}
             aria-label={`${openText}: experiment ${label}`}>{openText}</a>
        )}
        {!record.open && (
          <span class="exp-list-note" data-testid={`experiment-open-hint-${record.id}`}>
            <code>expctl ui</code> opens it read-only
          </span>
        )}
        {record.actions.stop && (
          <button type="button" class="danger" data-testid={`experiment-stop-${record.id}`}
                  aria-label={`Stop experiment ${label}`} onClick={() => act(record, 'stop')}>Stop</button>
        )}
        {record.actions.resume && (
          <button type="button" data-testid={`experiment-resume-${record.id}`}
                  aria-label={`Resume experiment ${label}`} onClick={() => act(record, 'resume')}>Resume</button>
        )}
        {record.actions.delete && (
          <button type="button" class="danger" data-testid={`experiment-delete-${record.id}`}
                  aria-label={`Delete experiment ${label}`} onClick={() => act(record, 'delete')}>Delete</button>
        )}
        {crashed && record.resumeCommand && (
          <p class="exp-list-note" data-testid={`experiment-crashed-${record.id}`}>
            Crashed: its process died without recording its end. Resume it with <code>{record.resumeCommand}</code>
          </p>
        )}
        {record.problem && <p class="exp-list-note problem" data-testid={`experiment-problem-${record.id}`}>{record.problem}</p>}
      </td>
    </tr>
  );
}

export function ExperimentsPage({ api }: { api: Api }) {
  const [records, setRecords] = useState<ExperimentRecord[] | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [working, setWorking] = useState<string | null>(null);
  const [message, setMessage] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);
  const confirm = useConfirm();
  const reloadRef = useRef<() => void>(() => undefined);

  useEffect(() => {
    let stopped = false;
    let timer: number | undefined;
    let busy = false;
    const load = async () => {
      if (busy) return;
      busy = true;
      window.clearTimeout(timer);
      try {
        const answer = await listExperiments(api);
        if (!stopped) {
          setRecords(answer.experiments);
          setLoadError(null);
        }
      } catch (err) {
        if (!stopped) setLoadError((err as Error).message || String(err));
      } finally {
        busy = false;
        if (!stopped) timer = window.setTimeout(load, REFRESH_MS);
      }
    };
    reloadRef.current = () => void load();
    void load();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
    };
  }, [api]);

  const run = (record: ExperimentRecord, action: ExperimentAction) => async () => {
    try {
      return await actOnExperiment(api, record.id, action);
    } finally {
      reloadRef.current();
    }
  };

  const act = (record: ExperimentRecord, action: ExperimentAction) => {
    const name = record.name ? `${record.name} (${record.id})` : record.id;
    if (action === 'resume') {
      setWorking(record.id);
      setMessage(null);
      run(record, action)()
        .then((text) => setMessage({ kind: 'ok', text }))
        .catch((err: Error) => setMessage({ kind: 'error', text: err.message || String(err) }))
        .finally(() => setWorking(null));
      return;
    }
    const question = action === 'stop'
      ? <>Stop experiment <b>{name}</b>? Its running trials are ended gracefully, as <code>expctl stop</code> does.</>
      : <>Delete experiment <b>{name}</b> with its store, logs and trials' files? This cannot be undone.</>;
    confirm.ask(question, run(record, action), action === 'stop' ? `experiment ${record.id} is stopping`
      : `deleted experiment ${record.id}`);
  };

  return (
    <div class="page experiments-page" data-testid="experiments-page">
      <h1>All experiments {records && <span class="exp-list-count" data-testid="experiments-count">{records.length}</span>}</h1>
      {confirm.view}
      {working && <p class="control-message" role="status">Resuming experiment {working}…</p>}
      {message && (
        <p class={`control-message ${message.kind}`} role="status">
          <span data-testid="experiments-message" data-kind={message.kind}>{message.text}</span>
          <button type="button" class="link" onClick={() => setMessage(null)} aria-label="dismiss">×</button>
        </p>
      )}
      {loadError && <p class="control-message error" role="alert" data-testid="experiments-error">{loadError}</p>}
      {records === null && !loadError && <p class="empty">Loading experiments…</p>}
      {records !== null && records.length === 0 && <p class="empty">No experiments yet: <code>expctl create --config config.yml</code> starts one.</p>}
      {records !== null && records.length > 0 && (
        <div class="exp-list-scroll">
          <table class="grid exp-list" data-testid="experiments-table" aria-label="All experiments">
            <thead>
              <tr>
                <th scope="col">State</th><th scope="col">Name</th><th scope="col">ID</th><th scope="col">Platform</th>
                <th scope="col">Best</th><th scope="col">Trials</th><th scope="col">Start</th>
                <th scope="col">Duration</th><th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {records.map((record) => <Row key={record.id} record={record} act={act} />)}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
