// Steering a running experiment: stop it, change its concurrency, max trials and max duration (the
// fields the server lists as updatable now). Shown while it runs, and after DONE while its manager
// still serves it, when the server offers max trials and max duration: raising one runs more trials.
// Never under `expctl view`, nor after ERROR (the server offers nothing then).
import { useState } from 'preact/hooks';
import { EXPERIMENT_FINISHED, parseDuration } from '../data/parse';
import { useApp } from './app-context';
import { useConfirm } from './confirm';
import { formatDuration } from './format';
import { UNREACHABLE_REASON, useUnreachableSince } from './Unreachable';

interface FieldProps {
  label: string;
  current: string;
  testid: string;
  placeholder: string;
  disabled: boolean;
  /** Shown under the field (a value it could not read); cleared by the panel on the next action. */
  error: string | null;
  /** The value to send, or an error message. */
  parse: (text: string) => Parsed;
  onApply: (value: number | string, text: string) => void;
  onError: (error: string | null) => void;
}

type Parsed = { value: number | string } | { error: string };

function Field({ label, current, testid, placeholder, disabled, error, parse, onApply, onError }: FieldProps) {
  const [text, setText] = useState<string | null>(null);
  const apply = (e: Event) => {
    e.preventDefault();
    const parsed = parse(text ?? current);
    if ('error' in parsed) {
      onError(parsed.error);
      return;
    }
    onApply(parsed.value, text ?? current);
    setText(null);
  };
  return (
    <form class="control-field" onSubmit={apply}>
      <label>
        <span>{label}</span>
        <input value={text ?? current} placeholder={placeholder} data-testid={`${testid}-input`} disabled={disabled}
               aria-invalid={error ? 'true' : undefined}
               onInput={(e) => { setText(e.currentTarget.value); if (error) onError(null); }} />
      </label>
      <button type="submit" data-testid={`${testid}-apply`} disabled={disabled}>Apply</button>
      {error && <span class="field-error" data-testid={`${testid}-error`} role="alert">{error}</span>}
    </form>
  );
}

function positiveInt(what: string) {
  return (text: string): Parsed => {
    const n = Number(text.trim());
    return Number.isInteger(n) && n > 0 ? { value: n } : { error: `${what}: expected a whole number above 0, got "${text}"` };
  };
}

/** A duration as typed, sent as typed (`4000d`) so that the server's refusal, if any, quotes it; a bare number as seconds. */
function durationAsTyped(text: string): Parsed {
  const typed = text.trim();
  if (Number.isNaN(parseDuration(typed))) {
    return { error: `max duration: expected 30s, 10m, 1.5h, 2d or seconds, got "${text}"` };
  }
  return { value: /^[\d.]+$/.test(typed) ? Number(typed) : typed };
}

export function Controls() {
  const { store, api } = useApp();
  const confirm = useConfirm();
  const [fieldError, setFieldError] = useState<{ field: string; text: string } | null>(null);
  const unreachableSince = useUnreachableSince();
  const exp = store.experiment;
  if (!exp) return null;
  const finished = EXPERIMENT_FINISHED.has(exp.status);
  // After DONE the server may still take a raise of the budget (its updatableFields say so).
  const moreTrials = finished && (exp.updatableFields?.length ?? 0) > 0;
  if (store.readOnly !== false && !moreTrials) return null;
  const stopping = exp.status === 'STOPPING';
  const off = (finished && !moreTrials) || unreachableSince !== null;
  const params = exp.params ?? {};
  const maxDuration = parseDuration(params.maxExperimentDuration);
  // Only the fields the server says may change, each sent with the update type it names.
  const updater = (field: string) => {
    const updateType = store.updateType(field);
    return updateType === undefined ? undefined
      : (value: number | string) => api.updateExperiment(updateType, field, value);
  };
  const setConcurrency = updater('trialConcurrency');
  const setMaxTrials = updater('maxTrialNumber');
  const setMaxDuration = updater('maxExperimentDuration');
  // an error belongs to one field, until that field or another control is used again
  const errorOf = (field: string) => (fieldError?.field === field ? fieldError.text : null);
  const onError = (field: string) => (text: string | null) => setFieldError(text === null ? null : { field, text });
  const ask: typeof confirm.ask = (...args) => {
    setFieldError(null);
    confirm.ask(...args);
  };

  return (
    <section class="card controls" data-testid="controls">
      <h2>Controls</h2>
      {unreachableSince !== null && <p class="muted" data-testid="controls-off-reason">{UNREACHABLE_REASON}</p>}
      {moreTrials && unreachableSince === null && (
        <p class="muted" data-testid="controls-more-trials">
          The experiment is {exp.status}. Raise max trials or max duration to run more trials: it goes back to RUNNING.
        </p>)}
      <div class="control-grid">
        {setConcurrency && <Field label="Concurrency" testid="concurrency" current={String(params.trialConcurrency ?? '')} placeholder="trials at once"
               disabled={off} parse={positiveInt('concurrency')} error={errorOf('concurrency')} onError={onError('concurrency')}
               onApply={(v) => ask(<>Change the trial concurrency from <b>{params.trialConcurrency ?? '?'}</b> to <b>{v}</b>?</>,
                 () => setConcurrency(v), `Concurrency set to ${v}.`, 'Change the concurrency?')} />}
        {setMaxTrials && <Field label="Max trials" testid="max-trials" current={String(params.maxTrialNumber ?? '')} placeholder="no limit"
               disabled={off} parse={positiveInt('max trials')} error={errorOf('max-trials')} onError={onError('max-trials')}
               onApply={(v) => ask(<>Change the maximum number of trials from <b>{params.maxTrialNumber ?? 'no limit'}</b> to <b>{v}</b>?</>,
                 () => setMaxTrials(v), `Max trials set to ${v}.`, 'Change the maximum number of trials?')} />}
        {setMaxDuration && <Field label="Max duration" testid="max-duration" placeholder="e.g. 30m, 1.5h, 2d"
               current={Number.isNaN(maxDuration) ? '' : formatDurationInput(maxDuration)} disabled={off}
               parse={durationAsTyped} error={errorOf('max-duration')} onError={onError('max-duration')}
               onApply={(v, text) => {
                 const shown = formatDuration(parseDuration(text.trim()));
                 ask(<>Change the maximum experiment duration to <b>{shown}</b>?</>,
                   () => setMaxDuration(v), `Max duration set to ${shown}.`, 'Change the maximum duration?');
               }} />}
      </div>
      {!finished && <div class="control-stop">
        <button type="button" class="danger" data-testid="stop-experiment" disabled={off || stopping}
                title={unreachableSince !== null ? UNREACHABLE_REASON : undefined}
                onClick={() => ask(<>Stop experiment <b>{exp.id}</b>? Running trials are stopped; it can be resumed later.</>,
                  () => api.stopExperiment(), 'Stopping the experiment.', 'Stop the experiment?')}>
          {stopping ? 'Stopping…' : 'Stop experiment'}
        </button>
      </div>}
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
