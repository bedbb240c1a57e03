// The search space on the overview: a table (parameter, type, values or range) and, while the
// experiment runs and the page is not a view, an editor of its JSON whose Save sends it to the
// server (NNI's SEARCH_SPACE update); the server's (or the tuner's) refusal is shown as it is.
import { useMemo, useState } from 'preact/hooks';
import { compactJson, searchSpaceRows } from '../data/searchSpace';
import type { Json } from '../data/types';
import { tid } from '../testids';
import { useApp } from './app-context';
import { useSubscribed } from './hooks';
import { useTakesTrials } from './TrialForm';

export function SearchSpaceTable({ space }: { space: Json | undefined }) {
  const rows = searchSpaceRows(space);
  if (!rows.length) return <p class="muted" data-testid="search-space-table">(none)</p>;
  return (
    <table class="grid space-table" data-testid="search-space-table">
      <thead><tr><th scope="col">Parameter</th><th scope="col">Type</th><th scope="col">Values</th></tr></thead>
      <tbody>
        {rows.map((r) => (
          <tr data-testid={tid.spaceRow(r.name)}>
            <th scope="row" class="mono">{r.name}</th><td>{r.type}</td><td class="mono">{r.values}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function SearchSpaceEditor() {
  const { store, api } = useApp();
  const experimentVersion = useSubscribed(store, () => store.experimentVersion);
  const space = store.experiment?.params?.searchSpace;
  const updateType = store.updateType('searchSpace');
  const editable = useTakesTrials() && updateType !== undefined;
  const [draft, setDraft] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);
  const text = useMemo(() => compactJson(space ?? null), [experimentVersion]);

  const save = async (e: Event) => {
    e.preventDefault();
    if (draft === null || updateType === undefined || busy) return;
    let parsed: Json;
    try {
      parsed = JSON.parse(draft) as Json;
    } catch (err) {
      setError(`search space: not JSON (${(err as Error).message})`);
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await api.updateSearchSpace(updateType, parsed);
      setDraft(null);
      setSaved(true);
    } catch (err) {
      setError((err as Error).message || String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="card wide" data-testid="search-space">
      <div class="card-head">
        <h2>Search space</h2>
        {editable && draft === null && (
          <button type="button" data-testid="edit-search-space"
                  onClick={() => { setDraft(text); setError(null); setSaved(false); }}>Edit</button>
        )}
      </div>
      {draft === null ? (
        <>
          <SearchSpaceTable space={space} />
          {saved && <p class="control-message ok" role="status" data-testid="search-space-saved">Search space saved.</p>}
        </>
      ) : (
        <form onSubmit={save}>
          <label for="search-space-json" class="block-label">Search space (JSON, NNI's format)</label>
          <textarea id="search-space-json" class="json-input" rows={Math.min(24, draft.split('\n').length + 2)}
                    spellcheck={false} value={draft} data-testid="search-space-input" disabled={busy}
                    onInput={(e) => setDraft(e.currentTarget.value)} />
          {error && <p class="field-error" role="alert" data-testid="search-space-error">{error}</p>}
          <div class="form-actions">
            <button type="button" data-testid="search-space-cancel" disabled={busy}
                    onClick={() => { setDraft(null); setError(null); }}>Cancel</button>
            <button type="submit" class="primary" data-testid="search-space-save" disabled={busy}>
              {busy ? 'Saving…' : 'Save'}
            </button>
          </div>
        </form>
      )}
    </div>
  );
}
