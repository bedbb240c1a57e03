// Adding a trial with chosen parameters (NNI's "customized trial"): the trials page's "Add trial"
// (empty) and a trial page's "Clone" (its parameters), one labelled field per parameter of the search
// space. The server checks the values and counts the trial against maxTrialNumber; its refusal is
// shown as it is.
import { useEffect, useRef, useState } from 'preact/hooks';
import { EXPERIMENT_FINISHED } from '../data/parse';
import { searchSpaceRows, type SpaceRow } from '../data/searchSpace';
import type { Json } from '../data/types';
import { tid } from '../testids';
import { useApp } from './app-context';
import { trialHref, useSubscribed } from './hooks';

/** Whether the experiment takes a new trial from this page: served by its manager, and not ending. */
export function useTakesTrials(): boolean {
  const { store } = useApp();
  const readOnly = useSubscribed(store, () => store.readOnly);
  const status = useSubscribed(store, () => store.experiment?.status);
  return readOnly === false && status !== undefined && !EXPERIMENT_FINISHED.has(status) && status !== 'STOPPING';
}

function isNestedOption(option: Json | undefined): option is { [key: string]: Json } {
  return typeof option === 'object' && option !== null && !Array.isArray(option) && typeof option._name === 'string';
}

/** What a field's text is sent as: a choice's option as given (a nested option: the cloned trial's
 *  value when it chose the same one, else its name alone, whose parameters the server then asks
 *  for), a number when the text is one (else the text, for the server to name what is wrong with
 *  it); undefined when empty. */
function fieldValue(row: SpaceRow, text: string, initial: Json | undefined): Json | undefined {
  if (row.options) {
    if (text === '') return undefined;
    const option = row.options[Number(text)];
    if (!isNestedOption(option)) return option;
    return isNestedOption(initial) && initial._name === option._name ? initial : { _name: option._name };
  }
  const trimmed = text.trim();
  if (trimmed === '') return undefined;
  const n = Number(trimmed);
  return Number.isFinite(n) ? n : trimmed;
}

/** The field's starting text for `value`: a choice's option index, else the number or text. */
function fieldText(row: SpaceRow, value: Json | undefined): string {
  if (value === undefined) return '';
  if (row.options) {
    const key = JSON.stringify(value);
    const nestedName = isNestedOption(value) ? value._name : undefined;
    const index = row.options.findIndex((o) => JSON.stringify(o) === key
      || (nestedName !== undefined && isNestedOption(o) && o._name === nestedName));
    return index < 0 ? '' : String(index);
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function optionLabel(option: Json): string {
  if (isNestedOption(option)) return String(option._name);
  return typeof option === 'string' ? option : JSON.stringify(option);
}

interface TrialFormProps {
  /** The parameters to start from (a cloned trial's); empty fields without. */
  initial?: Record<string, Json>;
  title: string;
  onClose: () => void;
  /** Told the new trial's id once the server took it. */
  onAdded: (trialId: string, sequenceId: number) => void;
}

export function TrialForm({ initial, title, onClose, onAdded }: TrialFormProps) {
  const { store, api } = useApp();
  // Top-level parameters only: a nested choice's option is sent whole (its own parameters as cloned).
  const rows = searchSpaceRows(store.experiment?.params?.searchSpace).filter((r) => !r.name.includes('.'));
  const [texts, setTexts] = useState<Record<string, string>>(
    () => Object.fromEntries(rows.map((r) => [r.name, fieldText(r, initial?.[r.name])])));
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const dialog = useRef<HTMLDivElement>(null);

  useEffect(() => {
    dialog.current?.querySelector<HTMLElement>('input, select')?.focus();
  }, []);
  // Escape closes wherever the focus is (a disabled button, while the server answers, drops it).
  useEffect(() => {
    const onEscape = (e: KeyboardEvent) => {
      if (e.key === 'Escape' && !busy) { e.preventDefault(); onClose(); }
    };
    document.addEventListener('keydown', onEscape);
    return () => document.removeEventListener('keydown', onEscape);
  }, [busy, onClose]);

  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    const parameters: Record<string, Json> = {};
    for (const row of rows) {
      const value = fieldValue(row, texts[row.name] ?? '', initial?.[row.name]);
      if (value !== undefined) parameters[row.name] = value;
    }
    setBusy(true);
    setError(null);
    try {
      const added = await api.addTrial(parameters);
      onAdded(added.trialJobId, added.sequenceId);
    } catch (err) {
      setError((err as Error).message || String(err));
    } finally {
      setBusy(false);
    }
  };
  // Back on the first field once the server answered (the disabled submit button lost the focus).
  useEffect(() => {
    if (error !== null) dialog.current?.querySelector<HTMLElement>('input, select')?.focus();
  }, [error]);

  // Tab stays inside the dialog.
  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key === 'Tab' && dialog.current) {
      const focusable = [...dialog.current.querySelectorAll<HTMLElement>('input, select, button:not(:disabled)')];
      const first = focusable[0];
      const last = focusable[focusable.length - 1];
      if (e.shiftKey && document.activeElement === first) { e.preventDefault(); last?.focus(); }
      else if (!e.shiftKey && document.activeElement === last) { e.preventDefault(); first?.focus(); }
    }
  };

  return (
    <div class="modal-backdrop" onClick={() => !busy && onClose()}>
      <div class="modal trial-form" role="dialog" aria-modal="true" aria-labelledby="trial-form-title"
           data-testid="trial-form" ref={dialog} onKeyDown={onKeyDown} onClick={(e) => e.stopPropagation()}>
        <h2 id="trial-form-title">{title}</h2>
        <form onSubmit={submit}>
          <p class="muted small">The server checks each value against the search space; the trial counts toward the
            maximum number of trials.</p>
          <div class="form-fields">
            {rows.map((row) => {
              const id = `trial-param-${row.name}`;
              const text = texts[row.name] ?? '';
              const set = (value: string) => setTexts((t) => ({ ...t, [row.name]: value }));
              return (
                <>
                  <label for={id}>{row.name} <span class="muted small">{row.type}</span></label>
                  {row.options ? (
                    <select id={id} value={text} data-testid={tid.trialFormParam(row.name)}
                            onChange={(e) => set(e.currentTarget.value)}>
                      <option value="">(choose)</option>
                      {row.options.map((o, i) => <option value={String(i)}>{optionLabel(o)}</option>)}
                    </select>
                  ) : (
                    <input id={id} value={text} inputMode="decimal" aria-describedby={`${id}-range`}
                           data-testid={tid.trialFormParam(row.name)} onInput={(e) => set(e.currentTarget.value)} />
                  )}
                  <span id={`${id}-range`} class="muted small">{row.options ? '' : row.values}</span>
                </>
              );
            })}
          </div>
          {error && <p class="field-error" role="alert" data-testid="trial-form-error">{error}</p>}
          <div class="modal-actions">
            <button type="button" data-testid="trial-form-cancel" disabled={busy} onClick={onClose}>Cancel</button>
            <button type="submit" class="primary" data-testid="trial-form-submit" disabled={busy}>
              {busy ? 'Adding…' : 'Add trial'}
            </button>
          </div>
        </form>
      </div>
    </div>
  );
}

/** A button that opens the form, and the link to the trial it added. */
export function AddTrialButton({ initial, label, testid, title }: {
  initial?: Record<string, Json>; label: string; testid: string; title: string;
}) {
  const takesTrials = useTakesTrials();
  const [open, setOpen] = useState(false);
  const [added, setAdded] = useState<{ id: string; seq: number } | null>(null);
  const opener = useRef<HTMLButtonElement>(null);
  if (!takesTrials && !added) return null;
  const close = () => { setOpen(false); opener.current?.focus(); };
  return (
    <>
      {takesTrials && (
        <button type="button" ref={opener} data-testid={testid} onClick={() => { setAdded(null); setOpen(true); }}>
          {label}
        </button>
      )}
      {added && (
        <span class="control-message ok" role="status">
          Added <a href={trialHref(added.id)} data-testid="trial-added">trial {added.id}</a> #{added.seq}
        </span>
      )}
      {open && <TrialForm initial={initial} title={title} onClose={close}
                          onAdded={(id, seq) => { setAdded({ id, seq }); close(); }} />}
    </>
  );
}
