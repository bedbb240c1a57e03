// Facts about the trials table's columns that depend on the data: how a column sorts first, and
// whether a parameter holds text (its filter then takes text, not ranges).
import type { SortKey } from './query';
import type { Trial } from './types';

/**
 * The direction of a column's first sort: the best results first for Result (ascending under the
 * server's `minimize`, descending under `maximize`), ascending for every other column.
 */
export function firstSortDirection(key: SortKey, optimize: 'maximize' | 'minimize'): 'asc' | 'desc' {
  if (key !== 'final') return 'asc';
  return optimize === 'minimize' ? 'asc' : 'desc';
}

/** Whether some trial's value of parameter `name` is not a number (a string, a nested choice, ...). */
export function isTextParam(trials: readonly Trial[], name: string): boolean {
  for (const t of trials) {
    const v = t.params[name];
    if (v !== undefined && typeof v !== 'number') return true;
  }
  return false;
}
