// Steering a running experiment: stop it, change its concurrency, max trials and max duration (the
// fields the server lists as updatable). Shown only when the server is not read-only (not under `expctl view`).
import { useState } from 'preact/hooks';
import { EXPERIMENT_FINISHED, parseDuration } from '../data/parse';
import { useApp } from './app-context';
import { useConfirm } from './confirm';
import { formatDuration } from './format';

interface FieldProps {
  label: string;
  current: string;
  testid: string;
  placeholder: string;
  disabled: boolean;
  /** The value to send, or an error message. */
  parse: (text: string) => number | string;
  onApply: (value: number, text: string) => void;
}

function Field({ label, current, testid, placeholder, disabled, parse, onApply }: FieldProps) {
  const [text, setText] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const apply = (e: Event) => {
    e.preventDefault();
    const value = parse(text ?? current);
    if (typeof value === 'string') {
      setError(value);
      return;
    }
    setError(null);
    onApply(value, text ?? current);
    setText(null);
  };
  return (
    <form class="control-field" onSubmit={apply}>
      <label>
        <span>{label}</span>
        <input value={text ?? current} placeholder={placeholder} data-testid={`${testid}-input`} disabled={disabled}
               onInput={(e) => setText(e.currentTarget.value)} />
      </label>
      <button type="submit" data-testid={`${testid}-apply`} disabled={disabled}>Apply</button>
      {error && <span class="field-error">{error}</span>}
    </form>
  );
}

function positiveInt(what: string) {
  return (text: string): number | string => {
    const n = Number(text.trim());
    return Number.isInteger(n) && n > 0 ? n : `${what}: expected a whole number above 0, got "${text}"`;
  };
}

export function Controls() {
  const { store, api } = useApp();
  const confirm = useConfirm();
  const exp = store.experiment;
  if (!exp || store.readOnly !== false) return null;
  const finished = EXPERIMENT_FINISHED.has(exp.status);
  const stopping = exp.status === 'STOPPING';
  const params = exp.params ?? {};
  const maxDuration = parseDuration(params.maxExperimentDuration);
  // Only the fields the server says may change, each sent with the update type it names.
  const updater = (field: string) => {
    const updateType = store.updateType(field);
    return updateType === undefined ? undefined : (value: number) => api.updateExperiment(updateType, field, value);
  };
  const setConcurrency = updater('trialConcurrency');
  const setMaxTrials = updater('maxTrialNumber');
  const setMaxDuration = updater('maxExperimentDuration');

  return (
    <section class="card controls" data-testid="controls">
      <h2>Controls</h2>
      <div class="control-grid">
        {setConcurrency && <Field label="Concurrency" testid="concurrency" current={String(params.trialConcurrency ?? '')} placeholder="trials at once"
               disabled={finished} parse={positiveInt('concurrency')}
               onApply={(v) => confirm.ask(<>Change the trial concurrency from <b>{params.trialConcurrency ?? '?'}</b> to <b>{v}</b>?</>,
                 () => setConcurrency(v), `Concurrency set to ${v}.`)} />}
        {setMaxTrials && <Field label="Max trials" testid="max-trials" current={String(params.maxTrialNumber ?? '')} placeholder="no limit"
               disabled={finished} parse={positiveInt('max trials')}
               onApply={(v) => confirm.ask(<>Change the maximum number of trials from <b>{params.maxTrialNumber ?? 'no limit'}</b> to <b>{v}</b>?</>,
                 () => setMaxTrials(v), `Max trials set to ${v}.`)} />}
        {setMaxDuration && <Field label="Max duration" testid="max-duration" placeholder="e.g. 30m, 1.5h, 2d"
               current={Number.isNaN(maxDuration) ? '' : formatDurationInput(maxDuration)} disabled={finished}
               parse={(text) => {
                 const s = parseDuration(text.trim());
                 return Number.isNaN(s) ? `max duration: expected 30s, 10m, 1.5h, 2d or seconds, got "${text}"` : s;
               }}
               onApply={(v) => confirm.ask(<>Change the maximum experiment duration to <b>{formatDuration(v)}</b>?</>,
                 () => setMaxDuration(v), `Max duration set to ${formatDuration(v)}.`)} />}
      </div>
      <div class="control-stop">
        <button type="button" class="danger" data-testid="stop-experiment" disabled={finished || stopping}
                onClick={() => confirm.ask(<>Stop experiment <b>{exp.id}</b>? Running trials are stopped; it can be resumed later.</>,
                  () => api.stopExperiment(), 'Stopping the experiment.')}>
          {stopping ? 'Stopping…' : 'Stop experiment'}
        </button>
      </div>
      {confirm.view}
    </section>
  );
}

/** Seconds as the shortest exact duration text (`90m`, `1.5h`, `2d`, `45s`). */
export function formatDurationInput(seconds: number): string {
  for (const [unit, size] of [['d', 86400], ['h', 3600], ['m', 60]] as const) {
    const n = seconds / size;
    if (n >= 1 && Number.isInteger(n * 10)) return `${n}${unit}`;
  }
  return `${seconds}s`;
}
