// Selecting trials in the trials table to compare them: a checkbox beside each row (outside
// the row's link, so each is its own control), and a bar with the count and the Compare link.
import { useState } from 'preact/hooks';
import { COMPARE_MAX, COMPARE_MIN, compareHref } from '../data/analysis';
import type { SortKey } from '../data/query';
import { tid } from '../testids';

export interface Selection {
  ids: string[];
  toggle: (id: string) => void;
  clear: () => void;
}

export function useSelection(): Selection {
  const [ids, setIds] = useState<string[]>([]);
  return {
    ids,
    toggle: (id) => setIds((current) => (current.includes(id) ? current.filter((x) => x !== id) : [...current, id])),
    clear: () => setIds([]),
  };
}

/** The table's first column: room for the checkboxes (drawn over it, beside the row's link). */
export const SELECT_COLUMN = { key: 'select' as SortKey, label: 'Pick', width: 44 };

export function SelectBox({ id, top, selection }: { id: string; top: number; selection: Selection }) {
  return (
    <input type="checkbox" class="select-box" style={{ top: `${top + 7}px` }} checked={selection.ids.includes(id)}
           aria-label={`Select trial ${id} to compare`} data-testid={tid.selectTrial(id)}
           onChange={() => selection.toggle(id)} />
  );
}

export function SelectionBar({ selection, resultKey }: { selection: Selection; resultKey: string }) {
  const count = selection.ids.length;
  const ok = count >= COMPARE_MIN && count <= COMPARE_MAX;
  const note = count > COMPARE_MAX ? `Compare takes at most ${COMPARE_MAX} trials: unselect ${count - COMPARE_MAX}.`
    : count > 0 && count < COMPARE_MIN ? `Select at least ${COMPARE_MIN} trials to compare.` : '';
  return (
    <div class="selection-bar" aria-live="polite">
      <span><span data-testid="selection-count">{count}</span> selected</span>
      {ok ? <a class="button" href={compareHref(selection.ids, resultKey)} data-testid="compare-selected">Compare</a>
        : <button type="button" disabled data-testid="compare-selected">Compare</button>}
      <button type="button" disabled={count === 0} onClick={selection.clear} data-testid="selection-clear">Clear selection</button>
      {note && <span class="muted" data-testid="selection-note">{note}</span>}
    </div>
  );
}
